package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOwnCgroup reads this process's real v2 cgroup: its directory must
// list this process in cgroup.procs, and its id must be the same by path
// and by open directory; OwnDir must name the same directory.
func TestOwnCgroup(t *testing.T) {
	m, err := ReadV2()
	if errors.Is(err, ErrNoV2) {
		t.Skip("skipping: no cgroup2 hierarchy is mounted")
	}
	if err != nil {
		t.Fatalf("ReadV2() = %v", err)
	}
	own, err := Own()
	if errors.Is(err, ErrNoV2) {
		t.Skip("skipping: this process is in no v2 cgroup")
	}
	if err != nil {
		t.Fatalf("Own() = %v", err)
	}
	dir, err := m.Dir(own)
	if err != nil {
		t.Fatalf("ReadV2().Dir(%q) = %v", own, err)
	}
	if od, err := OwnDir(); err != nil || od != dir {
		t.Errorf("OwnDir() = %q, %v, want %q", od, err, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatalf("reading cgroup.procs of own cgroup: %v", err)
	}
	if pids := strings.Fields(string(b)); !slices.Contains(pids, strconv.Itoa(os.Getpid())) {
		t.Errorf("%s/cgroup.procs = %v, want it to hold this process %d", dir, pids, os.Getpid())
	}
	id, err := ID(dir)
	if err != nil || id == 0 {
		t.Fatalf("ID(%q) = %d, %v, want a non-zero id", dir, id, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fid, err := FileID(f); err != nil || fid != id {
		t.Errorf("FileID(%s) = %d, %v, want %d", dir, fid, err, id)
	}
	if anc := m.Ancestors(own); anc[0] != own || anc[len(anc)-1] != filepath.Clean("/"+m.Root) {
		t.Errorf("Ancestors(%q) = %q, want from it up to the mount root %q", own, anc, m.Root)
	}
	if _, err := ID(filepath.Join(dir, "no-such-cgroup")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ID(missing) = %v, want ErrNotExist", err)
	}
}
