//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cgroups "github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/record/event"
)

// cgroup is the set of cgroup directories of one session: its v2 cgroup
// (identity, BPF attach point, freeze and kill) and, on hybrid hosts, one
// cgroup per v1 hierarchy that provides a controller it needs.
type cgroup struct {
	plan map[string]backend
	v2   Dir
	fd   *os.File
	id   uint64
	// v1 maps a controller to the session's directory in its hierarchy.
	v1 map[string]Dir
	// v1Parents are the manager's own directories in those hierarchies.
	v1Parents []string
	// dirs are the directories created, in creation order.
	dirs []string
	// noKillFile makes kill ignore cgroup.kill, as on kernels before 5.14
	// (tests use it to run the fallback for real).
	noKillFile bool
	// gone is set for an adopted session whose v2 cgroup no longer exists:
	// nothing can run in it, and there is nothing to kill.
	gone bool
}

// cfsPeriod is the CPU bandwidth period, in microseconds.
const cfsPeriod = 100000

// readLayout detects the current process's layout from procfs.
func readLayout() (*Layout, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroup: %w", err)
	}
	return DetectLayout(mi, pc)
}

// newCgroup creates the session's cgroups named name beneath the layout's
// cgroups and applies lim. On error it removes what it created.
func newCgroup(l *Layout, name string, lim event.Limits) (_ *cgroup, err error) {
	c := &cgroup{v1: map[string]Dir{}}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.closeAndRemove(ctx)
		}
	}()
	avail, err := readFields(filepath.Join(l.V2.Path, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	// cgroup.freeze exists in every non-root cgroup since Linux 5.2; the
	// parent may be the root, so look at cgroup.kill's sibling in a child
	// after creating it, and use the parent's file only as a hint here.
	c.plan = l.plan(avail, true)
	var want []string
	for _, r := range []string{"memory", "pids", "cpu"} {
		if c.plan[r] == backendV2 {
			want = append(want, r)
		}
	}
	if err := enableV2(l.V2.Path, want); err != nil {
		return nil, err
	}
	c.v2 = Dir{Path: filepath.Join(l.V2.Path, name), Rel: joinRel(l.V2.Rel, name)}
	if err := c.mkdir(c.v2.Path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.v2.Path, "cgroup.freeze")); err != nil {
		c.plan = l.plan(avail, false)
	}
	for _, r := range []string{"memory", "pids", "cpu", "freezer"} {
		if c.plan[r] != backendV1 {
			continue
		}
		parent := l.V1[r]
		d := Dir{Path: filepath.Join(parent.Path, name), Rel: joinRel(parent.Rel, name)}
		if !slices.Contains(c.dirs, d.Path) {
			if err := c.mkdir(d.Path); err != nil {
				return nil, err
			}
			c.v1Parents = append(c.v1Parents, parent.Path)
		}
		c.v1[r] = d
	}
	if err := c.applyLimits(lim); err != nil {
		return nil, err
	}
	fd, err := os.OpenFile(c.v2.Path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening session cgroup: %w", err)
	}
	c.fd = fd
	if c.id, err = cgroups.FileID(fd); err != nil {
		return nil, fmt.Errorf("reading session cgroup id: %w", err)
	}
	return c, nil
}

func joinRel(parent, name string) string {
	if parent == "/" || parent == "" {
		return "/" + name
	}
	return parent + "/" + name
}

func (c *cgroup) mkdir(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("creating cgroup: %w", err)
	}
	c.dirs = append(c.dirs, p)
	return nil
}

// enableV2 enables the controllers want in parent's cgroup.subtree_control,
// so that the session cgroup created beneath it has them (pure v2). The
// no-internal-process rule forbids that while parent holds processes and is
// not the root: then this process moves itself into a leaf child
// "sandtrail-daemon" (deeper, never out of its ancestors) and retries. If
// other processes share parent, enabling still fails and the error says so.
func enableV2(parent string, want []string) error {
	if len(want) == 0 {
		return nil
	}
	have, err := readFields(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var add []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			add = append(add, "+"+w)
		}
	}
	if len(add) == 0 {
		return nil
	}
	ctl := filepath.Join(parent, "cgroup.subtree_control")
	err = os.WriteFile(ctl, []byte(strings.Join(add, " ")), 0)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("enabling v2 controllers %v: %w", add, err)
	}
	leaf := filepath.Join(parent, "sandtrail-daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating daemon leaf cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("moving daemon into its leaf cgroup: %w", err)
	}
	if err := os.WriteFile(ctl, []byte(strings.Join(add, " ")), 0); err != nil {
		return fmt.Errorf("enabling v2 controllers %v (other processes share the daemon's cgroup?): %w", add, err)
	}
	return nil
}

// applyLimits writes lim into the controller files. A limit whose
// controller is unavailable is an error: limits fail closed.
func (c *cgroup) applyLimits(lim event.Limits) error {
	need := func(r string) (Dir, backend, error) {
		switch c.plan[r] {
		case backendV2:
			return c.v2, backendV2, nil
		case backendV1:
			return c.v1[r], backendV1, nil
		}
		return Dir{}, backendNone, fmt.Errorf("%w: %s", ErrControllerUnavailable, r)
	}
	if lim.MemoryBytes > 0 {
		d, b, err := need("memory")
		if err != nil {
			return err
		}
		v := strconv.FormatInt(lim.MemoryBytes, 10)
		if b == backendV2 {
			if err := writeCg(d.Path, "memory.max", v); err != nil {
				return err
			}
			if err := writeCg(d.Path, "memory.swap.max", "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else {
			if err := writeCg(d.Path, "memory.limit_in_bytes", v); err != nil {
				return err
			}
			// memsw (memory+swap) must be at least the memory limit, so
			// it is written second; absent without swap accounting.
			if err := writeCg(d.Path, "memory.memsw.limit_in_bytes", v); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if lim.Pids > 0 {
		d, _, err := need("pids")
		if err != nil {
			return err
		}
		if err := writeCg(d.Path, "pids.max", strconv.FormatInt(lim.Pids, 10)); err != nil {
			return err
		}
	}
	if lim.CPUs > 0 {
		d, b, err := need("cpu")
		if err != nil {
			return err
		}
		quota := cpuQuota(lim.CPUs)
		if b == backendV2 {
			if err := writeCg(d.Path, "cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriod)); err != nil {
				return err
			}
		} else {
			if err := writeCg(d.Path, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)); err != nil {
				return err
			}
			if err := writeCg(d.Path, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpuQuota converts a CPU count to a quota per cfsPeriod, at least the
// kernel's minimum of 1 ms.
func cpuQuota(cpus float64) int64 {
	q := int64(math.Round(cpus * cfsPeriod))
	return max(q, 1000)
}

func writeCg(dir, file, v string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

func readFields(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(p), err)
	}
	return strings.Fields(string(b)), nil
}

// start starts cmd inside the session, race-free in every hierarchy. The
// v2 membership comes from clone3's CLONE_INTO_CGROUP (SysProcAttr.CgroupFD):
// the child is born in the session's v2 cgroup. v1 hierarchies have no such
// flag, but v1 membership is per thread and a child inherits the cgroups of
// the thread that forks it. So start locks a fresh OS thread, writes that
// thread's tid into each v1 cgroup's "tasks" file, and forks from it (Go's
// fork runs on the calling thread). The child is therefore born inside every
// session cgroup before it runs one instruction: nothing it does can escape
// the limits, and no handshake or re-exec is needed. The thread then moves
// back to the manager's own v1 cgroups (Go may keep an exited locked thread
// alive for a while, and a v1 cgroup holding a thread cannot be removed),
// and it is never unlocked, so no other goroutine ever runs on it and the Go
// runtime ends it when the goroutine returns. enter, when not nil, runs on
// that thread just before the fork: it gives the thread (and so the child)
// the session's mount namespace. The same thread then carries the seccomp
// filter and no_new_privs to the child (startFiltered).
func (c *cgroup) start(cmd *exec.Cmd, enter func() error, f *seccomp.Filter) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.UseCgroupFD {
		return fmt.Errorf("%w: command already sets a cgroup", ErrInvalidSpec)
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(c.fd.Fd())
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: see above.
		tid := strconv.Itoa(syscall.Gettid())
		var err error
		for _, d := range c.v1Dirs() {
			if err = writeCg(d, "tasks", tid); err != nil {
				err = fmt.Errorf("joining v1 cgroup: %w", err)
				break
			}
		}
		if err == nil && enter != nil {
			err = enter()
		}
		if err == nil {
			err = startFiltered(cmd, f)
		}
		for _, d := range c.v1Parents {
			if werr := writeCg(d, "tasks", tid); werr != nil && err == nil {
				err = fmt.Errorf("leaving v1 cgroup: %w", werr)
			}
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("starting process: %w", err)
	}
	return nil
}

// startFiltered starts cmd from the calling thread, which is locked and never
// unlocked, under the filter f: the thread keeps the filter and
// no_new_privs until it ends, and the child inherits both.
func startFiltered(cmd *exec.Cmd, f *seccomp.Filter) error { return f.Start(cmd.Start) }

// v1Dirs returns each distinct v1 directory once.
func (c *cgroup) v1Dirs() []string {
	var out []string
	for _, r := range []string{"memory", "pids", "cpu", "freezer"} {
		if d, ok := c.v1[r]; ok && !slices.Contains(out, d.Path) {
			out = append(out, d.Path)
		}
	}
	return out
}

// checkMember verifies that pid is in every session cgroup. A process that
// is exiting cannot be checked (once past cgroup_exit the kernel shows it
// in the v1 roots) and passes: it was forked where the test suite verifies
// that processes are born, and it runs no more code. Exiting is monotonic,
// so reading the cgroups first and the exit state second is sound.
func (c *cgroup) checkMember(pid int) error {
	err := c.checkMember1(pid)
	if err != nil && exited(pid) {
		return nil
	}
	return err
}

// pfExiting is PF_EXITING in the flags field of /proc/<pid>/stat.
const pfExiting = 0x4

// exited reports whether pid is exiting, a zombie, or gone.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ppid pgrp session tty tpgid flags ...: comm may
	// hold ")", so cut at the last one.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

func (c *cgroup) checkMember1(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return fmt.Errorf("reading process cgroup: %w", err)
	}
	pc, err := cgroups.ParseProcCgroup(b)
	if err != nil {
		return err
	}
	if !pc.HasV2 || pc.V2 != c.v2.Rel {
		return fmt.Errorf("%w: pid %d is in v2 cgroup %q, want %q", ErrEscaped, pid, pc.V2, c.v2.Rel)
	}
	for r, d := range c.v1 {
		if got := pc.V1[r]; got != d.Rel {
			return fmt.Errorf("%w: pid %d is in %s cgroup %q, want %q", ErrEscaped, pid, r, got, d.Rel)
		}
	}
	return nil
}

// freeze freezes (or thaws) the session and waits until the kernel reports
// it done.
func (c *cgroup) freeze(ctx context.Context, frozen bool) error {
	switch c.plan["freezer"] {
	case backendV2:
		return freezeV2(ctx, c.v2.Path, frozen)
	case backendV1:
		return freezeV1(ctx, c.v1["freezer"].Path, frozen)
	}
	return fmt.Errorf("%w: freezer", ErrControllerUnavailable)
}

func freezeV2(ctx context.Context, dir string, frozen bool) error {
	v, want := "0", "frozen 0"
	if frozen {
		v, want = "1", "frozen 1"
	}
	if err := writeCg(dir, "cgroup.freeze", v); err != nil {
		return err
	}
	return waitFor(ctx, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return false, fmt.Errorf("reading cgroup.events: %w", err)
		}
		return slices.Contains(strings.Split(string(b), "\n"), want), nil
	})
}

func freezeV1(ctx context.Context, dir string, frozen bool) error {
	v := "THAWED"
	if frozen {
		v = "FROZEN"
	}
	if err := writeCg(dir, "freezer.state", v); err != nil {
		return err
	}
	return waitFor(ctx, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			return false, fmt.Errorf("reading freezer.state: %w", err)
		}
		if strings.TrimSpace(string(b)) == v {
			return true, nil
		}
		// FREEZING: a task was busy; asking again retries it.
		return false, writeCg(dir, "freezer.state", v)
	})
}

// waitFor polls done until it is true, it fails, or ctx ends.
func waitFor(ctx context.Context, done func() (bool, error)) error {
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for cgroup: %w", ctx.Err())
		case <-time.After(d):
		}
	}
}

// kill kills every process of the session and waits until none is left.
// It uses cgroup.kill (Linux 5.14+) when the v2 cgroup has it, and
// otherwise freezes the session, SIGKILLs each member and thaws it, so that
// nothing can fork in between. Either way it then thaws a paused session,
// because v1 frozen tasks only die once thawed.
func (c *cgroup) kill(ctx context.Context) error {
	if c.gone {
		return nil
	}
	var errs []error
	err := fs.ErrNotExist
	if !c.noKillFile {
		err = writeCg(c.v2.Path, "cgroup.kill", "1")
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if err := c.freeze(ctx, true); err != nil && !errors.Is(err, ErrControllerUnavailable) {
			errs = append(errs, err)
		}
		pids, err := c.pids()
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range pids {
			if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("killing pid %d: %w", p, err))
			}
		}
	}
	if err := c.freeze(ctx, false); err != nil && !errors.Is(err, ErrControllerUnavailable) {
		errs = append(errs, err)
	}
	if err := waitFor(ctx, func() (bool, error) {
		p, err := c.pids()
		return len(p) == 0, err
	}); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("killing session processes: %w", errors.Join(errs...))
	}
	return nil
}

// pids lists the processes in the session's v2 cgroup and its descendants.
func (c *cgroup) pids() ([]int, error) {
	var out []int
	err := filepath.WalkDir(c.v2.Path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != c.v2.Path && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing session processes: %w", err)
	}
	return out, nil
}

// closeAndRemove closes the cgroup fd and removes every directory created,
// nested ones first, retrying while the kernel still reports them busy.
func (c *cgroup) closeAndRemove(ctx context.Context) error {
	if c.fd != nil {
		c.fd.Close()
		c.fd = nil
	}
	var errs []error
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := removeTree(ctx, c.dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	c.dirs = nil
	if len(errs) > 0 {
		return fmt.Errorf("removing session cgroups: %w", errors.Join(errs...))
	}
	return nil
}

// removeTree rmdirs a cgroup directory and any cgroups nested in it.
func removeTree(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading cgroup: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(ctx, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return waitFor(ctx, func() (bool, error) {
		err := syscall.Rmdir(dir)
		switch {
		case err == nil || errors.Is(err, syscall.ENOENT):
			return true, nil
		case errors.Is(err, syscall.EBUSY):
			return false, nil
		}
		return false, fmt.Errorf("removing cgroup %s: %w", dir, err)
	})
}

// stats are the counters the limit monitor reads on each poll. A counter
// the host does not provide stays -1.
type stats struct {
	oomKill       int64
	memPeak       int64
	pidsEvents    int64
	pidsCurrent   int64
	throttledUsec int64
}

func (c *cgroup) readStats() stats {
	st := stats{oomKill: -1, memPeak: -1, pidsEvents: -1, pidsCurrent: -1, throttledUsec: -1}
	switch c.plan["memory"] {
	case backendV2:
		st.oomKill = keyed(c.v2.Path, "memory.events", "oom_kill")
		st.memPeak = single(c.v2.Path, "memory.peak")
		if st.memPeak < 0 {
			st.memPeak = single(c.v2.Path, "memory.current")
		}
	case backendV1:
		d := c.v1["memory"].Path
		st.oomKill = keyed(d, "memory.oom_control", "oom_kill")
		st.memPeak = single(d, "memory.max_usage_in_bytes")
	}
	var pd string
	switch c.plan["pids"] {
	case backendV2:
		pd = c.v2.Path
	case backendV1:
		pd = c.v1["pids"].Path
	}
	if pd != "" {
		st.pidsEvents = keyed(pd, "pids.events", "max")
		st.pidsCurrent = single(pd, "pids.current")
	}
	switch c.plan["cpu"] {
	case backendV2:
		st.throttledUsec = keyed(c.v2.Path, "cpu.stat", "throttled_usec")
	case backendV1:
		if ns := keyed(c.v1["cpu"].Path, "cpu.stat", "throttled_time"); ns >= 0 {
			st.throttledUsec = ns / 1000
		}
	}
	return st
}

// keyed reads one key of a flat keyed file, or -1.
func keyed(dir, file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	m, err := ParseKeyed(b)
	if err != nil {
		return -1
	}
	v, ok := m[key]
	if !ok {
		return -1
	}
	return v
}

// single reads a single-value file, or -1.
func single(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	v, err := parseCgroupInt(string(b))
	if err != nil {
		return -1
	}
	return v
}

// memRel is the session's path in the memory hierarchy, as the kernel's
// OOM report prints it, or "" without a memory controller.
func (c *cgroup) memRel() string {
	switch c.plan["memory"] {
	case backendV2:
		return c.v2.Rel
	case backendV1:
		return c.v1["memory"].Rel
	}
	return ""
}
