package npm

import (
	"strings"
	"testing"
)

// FuzzReadBack: the read-back of the hidden lockfile
// (node_modules/.package-lock.json, what an install left) claims one
// package per installed path, in order, each as its lock entry names it;
// never the root or a workspace folder; direct only at the top of
// node_modules; and required_by names only packages of the tree, never
// the project.
func FuzzReadBack(f *testing.F) {
	f.Add([]byte(`{"name":"proj","lockfileVersion":3,"packages":{"node_modules/a":{"version":"1.0.0","resolved":"https://registry.npmjs.org/a/-/a-1.0.0.tgz","integrity":"sha512-AAAA","dependencies":{"b":"^2"}},"node_modules/a/node_modules/b":{"version":"2.1.0","dependencies":{"a":"*"}},"node_modules/b":{"version":"3.0.0"},"node_modules/@s/c":{"version":"1.0.0","peerDependencies":{"a":"1"},"hasInstallScript":true}}}`))
	f.Add([]byte(`{"packages":{"":{"name":"proj","dependencies":{"x":"1"},"devDependencies":{"w":"*"}},"node_modules/x":{"name":"real","version":"1.0.0"},"node_modules/w":{"link":true,"resolved":"packages/w"},"packages/w":{"name":"w","version":"0.0.1","dependencies":{"x":"1"}}}}`))
	f.Add([]byte(`{"packages":{"node_modules/x":{"optional":true,"version":"1","optionalDependencies":{"y":"1"}},"node_modules/y":"odd","node_modules/":{},"a/node_modules/z":{"version":"9"}}}`))
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLock(b)
		if err != nil {
			return
		}
		paths := installed(l)
		names := map[string]bool{}
		for p := range l {
			if isPackagePath(p) {
				names[l.pkgName(p)] = true
			}
		}
		got := report(root, paths, l, nil, nil)
		if len(got) != len(paths) {
			t.Fatalf("report of %d installed paths claims %d packages", len(paths), len(got))
		}
		for i, p := range paths {
			if !isPackagePath(p) {
				t.Fatalf("installed(%q) includes %q, not under node_modules", b, p)
			}
			want := l.packageOf(p)
			g := got[i]
			if g.Name != want.Name || g.Version != want.Version || g.Hash != want.Hash || g.SourceURL != want.SourceURL {
				t.Fatalf("report[%d] (%s) = %+v, want %+v", i, p, g, want)
			}
			if g.Direct && strings.Count(p, "node_modules/") != 1 {
				t.Fatalf("report[%d] (%s) is direct, nested in another package", i, p)
			}
			if (len(g.RequiredBy) == 0) != (g.RequestedBy == "") || len(g.RequiredBy) > 0 && g.RequestedBy != g.RequiredBy[0] {
				t.Fatalf("report[%d] (%s): requested_by %q, want the first of required_by %q", i, p, g.RequestedBy, g.RequiredBy)
			}
			for _, n := range g.RequiredBy {
				if !names[n] {
					t.Fatalf("report[%d] (%s) is required by %q, no package of the tree (%q)", i, p, n, g.RequiredBy)
				}
			}
		}
	})
}
