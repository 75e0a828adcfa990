package pkgview

import (
	"testing"
)

// TestShimDirIsTheCallers: the shim directory is what the caller passes
// (the configured shim_dir), with no default of the launcher's. The same
// manager run under a shim is no bypass with the directory it ran from,
// and is one with no directory or another.
func TestShimDirIsTheCallers(t *testing.T) {
	r := newRec("S")
	r.spawn(10, 1, testShimDir+"/pip", "/w", "pip", "install", "x")
	r.fork(11, 10)
	r.execFile(11, 10, "/usr/bin/pip", "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "x")
	r.file(11, "read", pipMain)
	if got := alertSum(Build(r.evs, WithShimDir(testShimDir)).Alerts); len(got) != 0 {
		t.Errorf("Build with the shims' directory: alerts %v, want none", got)
	}
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"no shim directory", nil},
		{"another shim directory", []Option{WithShimDir("/usr/local/lib/sandtrail/shims")}},
	} {
		if got := alertSum(Build(r.evs, tt.opts...).Alerts); len(got) == 0 {
			t.Errorf("Build with %s: no alert, want the shim's pip taken for a bypass", tt.name)
		}
	}
}
