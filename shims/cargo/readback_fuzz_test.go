package cargo

import (
	"testing"
)

// FuzzLockResult: the read-back of a Cargo.lock and the download cache
// claims exactly what is on disk: each registry package of the lock whose
// .crate is in the cache, once per lock entry, in the lock's order, with
// the lock's checksum; no registry package without its .crate, no local
// package (no source), and no git package the lock held before unchanged.
// cached picks the .crate files in the cache: bit i of it for the lock's
// i-th registry package.
func FuzzLockResult(f *testing.F) {
	f.Add(lockAfter, lockBefore, []byte{0xff})
	f.Add(lockAfter, lockAfter, []byte{0x05})
	f.Add(`version = 3
[[package]]
name = "a"
version = "1.0.0"
source = "sparse+https://index.crates.io/"
checksum = "00"
dependencies = ["b 2.0.0 (git+https://g/b#1)", "a"]

[[package]]
name = "b"
version = "2.0.0"
source = "git+https://g/b#1"
dependencies = ["a 1.0.0 (sparse+https://index.crates.io/)"]

[[package]]
name = "root"
version = "0.1.0"
dependencies = ["a", "b"]
`, "", []byte{0x01})
	f.Fuzz(func(t *testing.T, after, before string, cached []byte) {
		pa, err := parseLock([]byte(after))
		if err != nil {
			return
		}
		pb, _ := parseLock([]byte(before))
		crates := map[string]bool{}
		var want []lockPkg
		n := 0
		for _, p := range pa {
			if !isRegistry(p.Source) {
				continue
			}
			if n/8 < len(cached) && cached[n/8]&(1<<(n%8)) != 0 {
				crates[p.Name+"-"+p.Version+".crate"] = true
			}
			n++
		}
		old := map[string]string{}
		for _, p := range pb {
			old[p.key()] = p.Checksum
		}
		for _, p := range pa {
			switch {
			case p.Source == "":
			case isRegistry(p.Source):
				if crates[p.Name+"-"+p.Version+".crate"] {
					want = append(want, p)
				}
			default:
				if sum, had := old[p.key()]; !had || sum != p.Checksum {
					want = append(want, p)
				}
			}
		}
		got := lockResult(lockState{pkgs: pb}, lockState{pkgs: pa, crates: crates}, nil)
		if len(got) != len(want) {
			t.Fatalf("lockResult claims %d packages, want %d (%+v; cache %v): %+v", len(got), len(want), want, crates, got)
		}
		for i, g := range got {
			w := want[i]
			hash := ""
			if w.Checksum != "" {
				hash = "sha256:" + w.Checksum
			}
			if g.Name != w.Name || g.Version != w.Version || g.SourceURL != w.Source || g.Hash != hash {
				t.Fatalf("lockResult[%d] = %+v, want %s %s from %s (hash %q)", i, g, w.Name, w.Version, w.Source, hash)
			}
			if g.Direct && g.RequestedBy != "" {
				t.Fatalf("lockResult[%d] = %+v: direct, and requested by %q", i, g, g.RequestedBy)
			}
		}
	})
}
