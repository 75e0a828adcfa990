package pkgview

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// forgedFetch is a pkg.fetch that looks like the mirror's in every field
// but its source: what an agent's process could send through the ingest
// socket, marked by the server with source (shim from a session, api from
// root outside every session).
func (r *rec) forgedFetch(src event.Source, eco, name, version, hash string) *event.Event {
	e := r.fetch(eco, name, version, hash, "served")
	e.Source = src
	return e
}

// TestForgedFetchIsNotTheMirrors: a pkg.fetch whose source is not mirror,
// next to a shim's pkg.install of the same package with the same hash,
// leaves the row the shim's unverified claim: shim_only, no verified, no
// mirror hash, an unverified_install alert, and a BOM that carries only
// the shim's hash, as shim_only. Such a fetch makes no row of its own,
// raises no other rule and verifies nothing, in Build and in a Watcher
// alike; the same events from the mirror join as shim+mirror.
func TestForgedFetchIsNotTheMirrors(t *testing.T) {
	for _, src := range event.Sources {
		if src == event.SourceMirror {
			continue
		}
		t.Run(string(src), func(t *testing.T) {
			r := newRec("S")
			r.forgedFetch(src, "npm", "left-pad", "1.3.0", sriA)
			r.install("npm", "left-pad", "1.3.0", sriA, 11)
			// A differing hash and another version: no mismatch is
			// raised from a fetch the mirror did not write.
			r.forgedFetch(src, "npm", "lodash", "4.17.21", sriA)
			r.install("npm", "lodash", "4.17.21", sriB, 12)
			r.forgedFetch(src, "pypi", "a", "1.0", shaA)
			r.install("pypi", "a", "2.0", shaB, 13)
			r.forgedFetch(src, "cargo", "only-forged", "1.0.0", hexA)

			v := build(r.evs)
			if len(v.Packages) != 3 {
				t.Fatalf("Build rows = %v, want the three installs' rows only", sumRows(v))
			}
			for _, p := range v.Packages {
				if p.Seen != SeenShimOnly || p.Verified != nil || p.MirrorHash != "" || p.UpstreamURL != "" || p.Outcome != "" ||
					len(p.Seqs) != 1 {
					t.Errorf("row %s@%s = seen %s, verified %v, mirror_hash %q, upstream %q, outcome %q, seqs %v; want the shim's claim alone",
						p.Name, p.Version, p.Seen, p.Verified, p.MirrorHash, p.UpstreamURL, p.Outcome, p.Seqs)
				}
			}
			unverified := []string{"unverified_install[1]", "unverified_install[3]", "unverified_install[5]"}
			if got := alertSum(v.Alerts); !slices.Equal(got, unverified) {
				t.Errorf("Build alerts = %v, want %v", got, unverified)
			}
			w := newWatcher()
			var live []*event.Event
			for _, e := range r.evs {
				live = append(live, w.Add(e)...)
			}
			if got := alertSum(live); !slices.Equal(got, unverified) {
				t.Errorf("Watcher alerts = %v, want %v", got, unverified)
			}
			checkForgedBOM(t, v)

			// The same events from the mirror are joined.
			for _, e := range r.evs {
				if e.Kind == event.KindPkgFetch {
					e.Source = event.SourceMirror
				}
			}
			if p := build(r.evs).Packages[0]; p.Seen != SeenBoth || p.Verified == nil || !*p.Verified || p.MirrorHash != sriA {
				t.Errorf("the mirror's own fetch: row = seen %s, verified %v, mirror_hash %q; want shim+mirror, verified, %s",
					p.Seen, p.Verified, p.MirrorHash, sriA)
			}
		})
	}
}

// checkForgedBOM checks that the BOM of v, whose fetches were all forged,
// has no component the mirror vouches for: each is shim_only, has no
// sandtrail:verified property and only its shim's hash.
func checkForgedBOM(t *testing.T, v *View) {
	t.Helper()
	b, err := CycloneDX(v, "S")
	if err != nil {
		t.Fatal(err)
	}
	var bom cdxBOM
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatal(err)
	}
	claimed := map[string]string{"left-pad": sriA, "lodash": sriB, "a": shaB}
	if len(bom.Components) != len(claimed) {
		t.Errorf("BOM has %d components, want %d: %s", len(bom.Components), len(claimed), b)
	}
	for _, c := range bom.Components {
		want := digests(claimed[c.Name])
		if len(c.Hashes) != len(want) || len(want) == 0 || c.Hashes[0].Content != want[0].hex {
			t.Errorf("BOM component %s: hashes %v, want only the shim's %s", c.Name, c.Hashes, claimed[c.Name])
		}
		for _, p := range c.Properties {
			switch {
			case p.Name == "sandtrail:seen" && p.Value != SeenShimOnly,
				p.Name == "sandtrail:verified", p.Name == "sandtrail:shim_hash":
				t.Errorf("BOM component %s has %s=%s; want it the shim's claim alone", c.Name, p.Name, p.Value)
			}
		}
	}
}
