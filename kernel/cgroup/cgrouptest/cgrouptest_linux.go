package cgrouptest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
)

// Cgroup is a scratch v2 cgroup that exists until the test ends.
type Cgroup struct {
	// Path is the cgroup's path in the v2 hierarchy, as
	// /proc/<pid>/cgroup names it.
	Path string
	// Dir is the cgroup's directory.
	Dir string
	// ID is the cgroup id: the inode number of Dir, which is what
	// bpf_get_current_cgroup_id returns.
	ID uint64

	mount cgroup.Mount
	f     *os.File // open on Dir, for CLONE_INTO_CGROUP
}

// RequireRoot skips tb unless it runs as root, which creating cgroups
// needs.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipping: needs root to create cgroups")
	}
}

// New makes a v2 cgroup with a random name beneath the test process's own
// v2 cgroup and removes it when the test ends. It skips tb, saying why,
// without root or without a v2 cgroup to make it beneath.
func New(tb testing.TB) *Cgroup {
	tb.Helper()
	RequireRoot(tb)
	m, err := cgroup.ReadV2()
	if err != nil {
		tb.Skipf("skipping: needs a cgroup v2 hierarchy: %v", err)
	}
	own, err := cgroup.Own()
	if err != nil {
		tb.Skipf("skipping: the test process is in no v2 cgroup: %v", err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	return mkdir(tb, m, path.Join(own, "sandtrail-test-"+hex.EncodeToString(rnd[:])))
}

// Child makes the cgroup name beneath c. It is removed before c.
func (c *Cgroup) Child(tb testing.TB, name string) *Cgroup {
	tb.Helper()
	return mkdir(tb, c.mount, path.Join(c.Path, name))
}

// mkdir makes the cgroup at hierarchy path p under m and registers its
// removal.
func mkdir(tb testing.TB, m cgroup.Mount, p string) *Cgroup {
	tb.Helper()
	dir, err := m.Dir(p)
	if err != nil {
		tb.Fatalf("finding the directory of cgroup %s: %v", p, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatalf("making cgroup: %v", err)
	}
	c := &Cgroup{Path: p, Dir: dir, mount: m}
	tb.Cleanup(func() { remove(tb, c) })
	if c.ID, err = cgroup.ID(dir); err != nil {
		tb.Fatal(err)
	}
	return c
}

// remove closes c's directory and removes it.
func remove(tb testing.TB, c *Cgroup) {
	if c.f != nil {
		c.f.Close()
	}
	Remove(tb, c.Dir)
}

// Remove removes the cgroup directory dir (of any hierarchy, v1 or v2)
// once its processes are gone: an exited process can stay in cgroup.procs
// for a moment. It waits up to 10 s, then fails tb. A dir that does not
// exist is not an error.
func Remove(tb testing.TB, dir string) {
	tb.Helper()
	var err error
	for range 200 {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Errorf("removing cgroup %s: %v", dir, err)
}

// FD returns a descriptor open on c's directory, for
// SysProcAttr.CgroupFD. It stays open until the test ends.
func (c *Cgroup) FD(tb testing.TB) int {
	tb.Helper()
	if c.f == nil {
		f, err := os.Open(c.Dir)
		if err != nil {
			tb.Fatalf("opening cgroup: %v", err)
		}
		c.f = f
	}
	return int(c.f.Fd())
}

// SysProcAttr starts a child directly inside c (CLONE_INTO_CGROUP), as
// user and group uid when uid >= 0.
func (c *Cgroup) SysProcAttr(tb testing.TB, uid int) *syscall.SysProcAttr {
	tb.Helper()
	a := &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD(tb)}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	return a
}

// Move moves process pid into c.
func (c *Cgroup) Move(tb testing.TB, pid int) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		tb.Fatalf("moving %d to cgroup %s: %v", pid, c.Path, err)
	}
}

// Mount returns the v2 hierarchy's mount.
func (c *Cgroup) Mount() cgroup.Mount { return c.mount }

// ExecStorm forks and execs /bin/true n times directly inside c, from
// workers goroutines, and waits for every child. It returns the first
// error, a non-zero exit status included. It is the load of the
// collector's tests and benchmarks.
func (c *Cgroup) ExecStorm(tb testing.TB, n, workers int) error {
	tb.Helper()
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD(tb)}}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				pid, err := syscall.ForkExec("/bin/true", []string{"/bin/true"}, attr)
				if err != nil {
					errs <- fmt.Errorf("exec %d: %w", i, err)
					return
				}
				var ws syscall.WaitStatus
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
					errs <- fmt.Errorf("waiting for exec %d: %w", i, err)
					return
				}
				if ws.ExitStatus() != 0 {
					errs <- fmt.Errorf("exec %d: exit status %d", i, ws.ExitStatus())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// OwnID returns the id of this process's cgroup v2 (what sock_diag and
// bpf_get_current_cgroup_id name its sockets and threads by), or skips the
// test when there is none.
func OwnID(tb testing.TB) uint64 {
	tb.Helper()
	dir, err := cgroup.OwnDir()
	if err != nil {
		tb.Skipf("no own cgroup v2: %v", err)
	}
	id, err := cgroup.ID(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}
