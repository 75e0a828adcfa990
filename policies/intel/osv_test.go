package intel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
)

// fixture is the shipped fixture export: a malicious-packages tree.
const fixture = "testdata/osv"

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr error
		check   func(t *testing.T, r *Record)
	}{
		{name: "every version, with iocs and origins", in: "@malicious/npm/evil-pkg/MAL-2025-1001.json", check: func(t *testing.T, r *Record) {
			if r.ID != "MAL-2025-1001" || len(r.Affected) != 1 || r.Affected[0].Ecosystem != "npm" || !r.Affected[0].Every() {
				t.Errorf("record = %+v, want npm evil-pkg at every version", r)
			}
			if !slices.Equal(r.IOCs.Domains, []string{"exfil.example"}) || !slices.Equal(r.IOCs.IPs, []string{"203.0.113.7"}) ||
				!slices.Equal(r.IOCs.URLs, []string{"https://hooks.exfil.example/collect"}) {
				t.Errorf("iocs = %+v, want the well-formed ones only", r.IOCs)
			}
			if len(r.Origins) != 1 || r.Origins[0].Source != "ossf-package-analysis" {
				t.Errorf("origins = %+v", r.Origins)
			}
		}},
		{name: "listed versions of a scoped name", in: "@malicious/npm/@typo/colors/MAL-2025-1002.json", check: func(t *testing.T, r *Record) {
			if a := r.Affected[0]; a.Name != "@typo/colors" || !slices.Equal(a.Versions, []string{"1.0.1", "1.0.2"}) || a.Every() {
				t.Errorf("affected = %+v", a)
			}
		}},
		{name: "PyPI maps to pypi, ips spelled ips", in: "@malicious/pypi/reqeusts/MAL-2025-2001.json", check: func(t *testing.T, r *Record) {
			if a := r.Affected[0]; a.Ecosystem != "pypi" || len(a.Ranges) != 1 || len(a.Ranges[0].Events) != 4 {
				t.Errorf("affected = %+v", a)
			}
			if !slices.Equal(r.IOCs.IPs, []string{"198.51.100.23"}) {
				t.Errorf("ips = %v", r.IOCs.IPs)
			}
		}},
		{name: "crates.io maps to cargo, file digests from affected", in: "@malicious/crates.io/proc-macro1/MAL-2025-3001.json", check: func(t *testing.T, r *Record) {
			if r.Affected[0].Ecosystem != "cargo" || len(r.IOCs.SHA256) != 1 || r.IOCs.SHA256[0] != strings.ToLower(r.IOCs.SHA256[0]) {
				t.Errorf("record = %+v", r)
			}
		}},
		{name: "withdrawn time", in: "@withdrawn/npm/fine-pkg/MAL-2025-1003.json", check: func(t *testing.T, r *Record) {
			if r.Withdrawn.IsZero() {
				t.Errorf("withdrawn = zero, want 2025-10-05")
			}
		}},
		{name: "staging", in: "@malicious/npm/staged/MAL-0000-ossf-package-analysis-7a9abf0f83d64870.json", wantErr: ErrStaging},
		{name: "another ecosystem", in: "@malicious/rubygems/gemx/MAL-2025-4001.json", wantErr: ErrNoPackage, check: func(t *testing.T, r *Record) {
			if !slices.Equal(r.Other, []string{"RubyGems"}) {
				t.Errorf("other = %v, want RubyGems", r.Other)
			}
		}},
		{name: "Debian with a release", in: `{"id":"MAL-2025-9","modified":"2025-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"Debian:12","name":"curlx"},"versions":["1.0-1"]}]}`,
			check: func(t *testing.T, r *Record) {
				if r.Affected[0].Ecosystem != "deb" {
					t.Errorf("ecosystem = %q, want deb", r.Affected[0].Ecosystem)
				}
			}},
		{name: "a vulnerability advisory", in: `{"id":"GHSA-29mw-wpgm-hmr9","modified":"2025-01-01T00:00:00Z"}`, wantErr: ErrNotMalicious},
		{name: "not json", in: `{"id":`, wantErr: ErrInvalid},
		{name: "no id", in: `{"modified":"2025-01-01T00:00:00Z"}`, wantErr: ErrInvalid},
		{name: "an id with a newline", in: `{"id":"MAL-2025-1\n","modified":"2025-01-01T00:00:00Z"}`, wantErr: ErrInvalid},
		{name: "no modified time", in: `{"id":"MAL-2025-1"}`, wantErr: ErrInvalid},
		{name: "an event with two fields", in: `{"id":"MAL-2025-1","modified":"2025-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"x"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0","fixed":"1.0.0"}]}]}]}`, wantErr: ErrInvalid},
		{name: "a git range is left out", in: `{"id":"MAL-2025-1","modified":"2025-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"x"},"ranges":[{"type":"GIT","events":[{"introduced":"abc"}]}]}]}`, wantErr: ErrNoPackage},
		{name: "a name npm refuses", in: `{"id":"MAL-2025-1","modified":"2025-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"a b;rm"},"versions":["1.0.0"]}]}`, wantErr: ErrNoPackage},
		{name: "too large", in: `{"id":"MAL-2025-1","details":"` + strings.Repeat("x", MaxRecordSize) + `"}`, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if rel, ok := strings.CutPrefix(tt.in, "@"); ok {
				in = readFixture(t, rel)
			}
			r, err := ParseRecord(in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseRecord = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("ParseRecord = %v", err)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// FuzzParseRecord: ParseRecord never panics, a record it keeps has a MAL-
// id and affected packages of known ecosystems with names, and the store's
// matchers can be built from it and asked about any version.
func FuzzParseRecord(f *testing.F) {
	_ = filepath.WalkDir(fixture, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			return
		}
		if !strings.HasPrefix(r.ID, "MAL-") || len(r.Affected) == 0 {
			t.Fatalf("kept %q with %d affected", r.ID, len(r.Affected))
		}
		for i := range r.Affected {
			a := &r.Affected[i]
			if a.Name == "" || a.Ecosystem == "" {
				t.Fatalf("affected %+v has no name or ecosystem", a)
			}
			m := newMatcher(a)
			eco, err := resolver.Lookup(a.Ecosystem)
			if err != nil {
				t.Fatalf("affected ecosystem %q: %v", a.Ecosystem, err)
			}
			for _, v := range append(slices.Clone(a.Versions), "1.0.0", "0", "") {
				_ = m.match(eco, v)
			}
		}
	})
}
