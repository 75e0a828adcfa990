package archive

import (
	"errors"
	"testing"
)

// FuzzParse feeds untrusted bytes to Parse and what it accepts to Verify:
// neither may panic, every Parse error wraps ErrMalformed, every Verify
// error ErrTampered, and a bundle that verifies holds what its manifest
// says.
func FuzzParse(f *testing.F) {
	fx := newFixture(f, 2, 4)
	for _, s := range fx.sessions {
		b := fx.seal(f, s)
		f.Add(b.Bytes())
		f.Add(b.Bytes()[:len(b.Bytes())-9])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse() = %v, want it to wrap ErrMalformed", err)
			}
			return
		}
		rep, err := b.Verify(fx.verifiers)
		if err != nil {
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("Verify() = %v, want it to wrap ErrTampered", err)
			}
			return
		}
		if rep.Entries != b.Manifest.Entries || rep.SessionID != b.Manifest.SessionID {
			t.Fatalf("Verify() = %+v, manifest %+v", rep, b.Manifest)
		}
	})
}

// FuzzParseParts fuzzes the files inside a well-formed tar.gz (the
// manifest, the entries and the proofs, beside a real checkpoint), which
// mutations of the compressed bytes seldom reach.
func FuzzParseParts(f *testing.F) {
	fx := newFixture(f, 2, 4)
	var checkpoint []byte
	for _, s := range fx.sessions {
		files := filesOf(f, fx.seal(f, s).Bytes())
		checkpoint = files[1].data
		f.Add(files[0].data, files[2].data, files[3].data)
	}
	f.Add([]byte(`{"format":"sandtrail.session-bundle.v1","entries":2,"seqs":[[0,0],[2,2]]}`), []byte("{}\n{}\n"), []byte(`[{"seq":0},{"seq":2}]`))
	f.Add([]byte(`{"entries":3,"seqs":[[18446744073709551615,18446744073709551615],[0,1]]}`), []byte("\n\n\n"), []byte(`[]`))
	f.Fuzz(func(t *testing.T, manifest, entries, proofs []byte) {
		data := gzipTar(t, []tarFile{{name: manifestName, data: manifest}, {name: checkpointName, data: checkpoint},
			{name: entriesName, data: entries}, {name: proofsName, data: proofs}}, nil)
		b, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse() = %v, want it to wrap ErrMalformed", err)
			}
			return
		}
		if _, err := b.Verify(fx.verifiers); err != nil && !errors.Is(err, ErrTampered) {
			t.Fatalf("Verify() = %v, want it to wrap ErrTampered", err)
		}
	})
}
