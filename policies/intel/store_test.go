package intel

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// openStore opens a store in a temporary directory, checking for changes
// on every lookup.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "intel.db"), WithRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func importPath(t *testing.T, s *Store, path string) Counts {
	t.Helper()
	c, err := s.Import(context.Background(), path)
	if err != nil {
		t.Fatalf("Import(%s) = %v", path, err)
	}
	return c
}

func TestLookup(t *testing.T) {
	s := openStore(t)
	importPath(t, s, fixture)
	tests := []struct {
		name, eco, pkg, version string
		want                    []string
	}{
		{"every version", "npm", "evil-pkg", "9.9.9", []string{"MAL-2025-1001"}},
		{"every version, unresolved", "npm", "evil-pkg", "", []string{"MAL-2025-1001"}},
		{"npm names are case-sensitive", "npm", "Evil-Pkg", "1.0.0", nil},
		{"a listed version", "npm", "@typo/colors", "1.0.2", []string{"MAL-2025-1002"}},
		{"an unlisted version", "npm", "@typo/colors", "1.0.3", nil},
		{"listed versions need a version", "npm", "@typo/colors", "", nil},
		{"PyPI names compare by PEP 503", "pypi", "reqeusts", "1.1", []string{"MAL-2025-2001"}},
		{"PyPI range, fixed", "pypi", "Reqeusts", "1.2", nil},
		{"PyPI range, between", "pypi", "REQEUSTS", "1.5", nil},
		{"PyPI range, second introduced", "pypi", "reqeusts", "2.0.0", []string{"MAL-2025-2001"}},
		{"PyPI range, last affected", "pypi", "reqeusts", "2.1.post1", []string{"MAL-2025-2001"}},
		{"PyPI range, past last affected", "pypi", "reqeusts", "2.1.1", nil},
		{"PyPI range, before", "pypi", "reqeusts", "0.9", nil},
		{"cargo names fold _ and -", "cargo", "proc-macro1", "0.1.0", []string{"MAL-2025-3001"}},
		{"staging is not imported", "npm", "staged", "1.0.0", nil},
		{"withdrawn is not imported", "npm", "fine-pkg", "1.0.0", nil},
		{"another ecosystem", "npm", "gemx", "1.0.0", nil},
		{"an unlisted name", "npm", "left-pad", "1.3.0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range s.Lookup(tt.eco, tt.pkg, tt.version) {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Lookup(%s, %s, %q) = %v, want %v", tt.eco, tt.pkg, tt.version, got, tt.want)
			}
		})
	}
	if r := s.LookupHash("sha256:ab5d0e0c5a6b27f3f0e5c8c1b0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9"); len(r) != 1 || r[0].ID != "MAL-2025-3001" {
		t.Errorf("LookupHash = %v, want MAL-2025-3001", r)
	}
	if r := s.Lookup("npm", "evil-pkg", "1.0.0"); len(r) != 1 || r[0].Summary == "" {
		t.Errorf("Lookup returns %v, want the whole record", r)
	}
}

func TestImportCounts(t *testing.T) {
	s := openStore(t)
	c := importPath(t, s, fixture)
	if c.Kept != 4 || c.Unchanged != 0 || c.Withdrawn != 1 || c.Removed != 0 || c.Skipped != 2 ||
		c.SkippedBy[SkipStaging] != 1 || c.SkippedBy["ecosystem:RubyGems"] != 1 {
		t.Errorf("first import = %+v, want 4 kept, 1 withdrawn, staging and RubyGems skipped", c)
	}
	if e := c.Ecosystems["npm"]; e == nil || e.Kept != 2 || e.Withdrawn != 1 {
		t.Errorf("npm counts = %+v, want 2 kept, 1 withdrawn", e)
	}
	g := s.Generation()
	// Idempotent: the same files again change nothing.
	c = importPath(t, s, fixture)
	if c.Kept != 4 || c.Unchanged != 4 {
		t.Errorf("second import = %+v, want the 4 kept unchanged", c)
	}
	if s.Generation() == g {
		t.Errorf("the generation did not move with the second import")
	}
	if len(s.IOCs()) != 5 {
		t.Errorf("IOCs = %v, want 5 (domain, url and ip of 1001, ip of 2001, sha256 of 3001)", s.IOCs())
	}
}

// TestImportWithdraws: a record first listed is removed by a later import
// that withdraws it, whether by its directory or by its withdrawn time; a
// record older than the stored one does not replace it.
func TestImportWithdraws(t *testing.T) {
	s := openStore(t)
	dir := t.TempDir()
	listed := []byte(`{"id":"MAL-2025-1003","modified":"2025-10-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"fine-pkg"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}]}]}`)
	writeFile(t, filepath.Join(dir, "osv/malicious/npm/fine-pkg/MAL-2025-1003.json"), listed)
	importPath(t, s, dir)
	if len(s.Lookup("npm", "fine-pkg", "1.0.0")) != 1 {
		t.Fatalf("fine-pkg not listed after the first import")
	}
	c := importPath(t, s, filepath.Join(fixture, "withdrawn"))
	if c.Withdrawn != 1 || c.Removed != 1 {
		t.Errorf("withdrawing import = %+v, want 1 withdrawn and removed", c)
	}
	if got := s.Lookup("npm", "fine-pkg", "1.0.0"); len(got) != 0 {
		t.Errorf("after the withdrawal Lookup = %v, want none", got)
	}
	if _, ok, _ := s.Record(context.Background(), "MAL-2025-1003"); ok {
		t.Errorf("the withdrawn record is still in the store")
	}
	// A withdrawn time outside a withdrawn/ directory withdraws too.
	importPath(t, s, dir)
	byTime := filepath.Join(t.TempDir(), "MAL-2025-1003.json")
	writeFile(t, byTime, readFixture(t, "withdrawn/npm/fine-pkg/MAL-2025-1003.json"))
	if c := importPath(t, s, byTime); c.Removed != 1 {
		t.Errorf("import of a record with a withdrawn time = %+v, want it removed", c)
	}
	// An older copy does not replace a newer one.
	importPath(t, s, fixture)
	older := []byte(`{"id":"MAL-2025-1001","modified":"2020-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"other"},"versions":["1.0.0"]}]}`)
	old := filepath.Join(t.TempDir(), "MAL-2025-1001.json")
	writeFile(t, old, older)
	if c := importPath(t, s, old); c.SkippedBy[SkipStale] != 1 {
		t.Errorf("import of an older copy = %+v, want it skipped as stale", c)
	}
	if len(s.Lookup("npm", "evil-pkg", "1.0.0")) != 1 {
		t.Errorf("the older copy replaced the newer record")
	}
}

// TestImportZip: an osv.dev export (<ECOSYSTEM>/all.zip), built here from
// the fixture's records with an advisory that is not malicious among
// them, imports as the tree does.
func TestImportZip(t *testing.T) {
	dir := t.TempDir()
	writeZip(t, filepath.Join(dir, "npm", "all.zip"), map[string][]byte{
		"MAL-2025-1001.json":       readFixture(t, "malicious/npm/evil-pkg/MAL-2025-1001.json"),
		"MAL-2025-1002.json":       readFixture(t, "malicious/npm/@typo/colors/MAL-2025-1002.json"),
		"GHSA-29mw-wpgm-hmr9.json": []byte(`{"id":"GHSA-29mw-wpgm-hmr9","modified":"2025-01-01T00:00:00Z"}`),
	})
	writeZip(t, filepath.Join(dir, "PyPI", "all.zip"), map[string][]byte{
		"MAL-2025-2001.json": readFixture(t, "malicious/pypi/reqeusts/MAL-2025-2001.json"),
		"PYSEC-2024-1.json":  []byte(`{"id":"PYSEC-2024-1","modified":"2025-01-01T00:00:00Z"}`),
	})
	for _, path := range []string{dir, filepath.Join(dir, "npm", "all.zip")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := openStore(t)
			c := importPath(t, s, path)
			want := 3
			if filepath.Ext(path) == ".zip" {
				want = 2
			}
			if c.Kept != want || c.SkippedBy[SkipNotMalicious] == 0 {
				t.Errorf("Import(%s) = %+v, want %d kept and the advisories skipped", path, c, want)
			}
			if len(s.Lookup("npm", "@typo/colors", "1.0.1")) != 1 {
				t.Errorf("@typo/colors@1.0.1 not listed after importing %s", path)
			}
		})
	}
}

// TestStoreSeesOtherWriters: a store open in one process (the mirror)
// answers from what another (intel import) wrote, once it refreshes.
func TestStoreSeesOtherWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "intel.db")
	reader, err := Open(path, WithRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	writer, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if len(reader.Lookup("npm", "evil-pkg", "1.0.0")) != 0 {
		t.Fatal("listed before any import")
	}
	importPath(t, writer, fixture)
	if len(reader.Lookup("npm", "evil-pkg", "1.0.0")) != 1 {
		t.Errorf("the reader does not see the writer's import")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
