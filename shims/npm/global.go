package npm

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// npm writes no lockfile for the global folder, so the read-back reads
// the installed tree itself: each package's package.json gives its name,
// version and dependencies, and the npm cache's index entries written
// during the install give the tarball URL and integrity. A tarball that
// was already in the cache is not fetched again, so its URL and hash stay
// empty.

// maxTree caps the packages read from a global folder.
const maxTree = 20000

// readTree reads the packages under root/node_modules as a lock keyed as
// npm keys lockfiles ("node_modules/a/node_modules/b"). A package is
// inBundle, as npm's lockfiles say, when the package it is nested in
// bundles it (its bundleDependencies) or is in a bundle itself.
func readTree(root string) lock {
	l := lock{}
	var walk func(rel string)
	walk = func(rel string) {
		nm := filepath.Join(root, filepath.FromSlash(rel), "node_modules")
		ents, err := os.ReadDir(nm)
		if err != nil {
			return
		}
		for _, e := range ents {
			names := []string{e.Name()}
			if strings.HasPrefix(e.Name(), "@") && e.IsDir() {
				names = nil
				sub, _ := os.ReadDir(filepath.Join(nm, e.Name()))
				for _, s := range sub {
					names = append(names, e.Name()+"/"+s.Name())
				}
			}
			for _, n := range names {
				if strings.HasPrefix(n, ".") || len(l) >= maxTree {
					continue
				}
				p := strings.TrimPrefix(rel+"/node_modules/"+n, "/")
				if target, err := os.Readlink(filepath.Join(nm, n)); err == nil {
					l[p] = entry{Link: true, Resolved: target}
					continue
				}
				if ent, ok := readInstalled(filepath.Join(nm, n)); ok {
					if parent, ok := l[rel]; ok && (parent.InBundle || parent.bundles(n)) {
						ent.InBundle = true
					}
					l[p] = ent
					walk(p)
				}
			}
		}
	}
	walk("")
	return l
}

// readInstalled reads an installed package's package.json as a lock
// entry.
func readInstalled(dir string) (entry, bool) {
	b, err := readCapped(filepath.Join(dir, "package.json"))
	if err != nil {
		return entry{}, false
	}
	var pj struct {
		entry
		Scripts map[string]any `json:"scripts"`
	}
	if json.Unmarshal(b, &pj) != nil {
		return entry{Version: "?"}, true
	}
	e := pj.entry
	e.DevDependencies = nil
	for _, s := range []string{"preinstall", "install", "postinstall"} {
		if _, ok := pj.Scripts[s]; ok {
			e.HasInstallScript = true
		}
	}
	return e, true
}

// cacheFetches are the tarballs the npm cache at dir recorded since
// since: URL → integrity.
func cacheFetches(dir string, since time.Time) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(filepath.Join(dir, "_cacache", "index-v5"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || len(out) >= maxTree {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.ModTime().Before(since) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			_, js, _ := strings.Cut(sc.Text(), "\t")
			var e struct {
				Key       string `json:"key"`
				Integrity string `json:"integrity"`
			}
			if json.Unmarshal([]byte(js), &e) == nil {
				if u, ok := strings.CutPrefix(e.Key, "make-fetch-happen:request-cache:"); ok && strings.HasSuffix(u, ".tgz") {
					out[u] = e.Integrity
				}
			}
		}
		return nil
	})
	return out
}

// fillFetched gives each entry of l the URL and integrity of the fetched
// tarball that names its name and version; a bundled one gets none, since
// a tarball of its name and version is another copy.
func fillFetched(l lock, fetched map[string]string) {
	for p, e := range l {
		if e.Link || e.Resolved != "" || e.InBundle {
			continue // a bundled copy came inside its carrier's tarball
		}
		name := l.pkgName(p)
		base := name[strings.LastIndexByte(name, '/')+1:]
		tail := "/-/" + base + "-" + e.Version + ".tgz"
		for u, integ := range fetched {
			if strings.HasSuffix(u, tail) && (strings.Contains(u, "/"+name+"/-/") || strings.Contains(u, "/"+strings.Replace(name, "/", "%2f", 1)+"/-/")) {
				e.Resolved, e.Integrity = u, integ
				l[p] = e
				break
			}
		}
	}
}
