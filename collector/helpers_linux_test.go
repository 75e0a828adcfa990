//go:build 386 || amd64 || arm64

package collector

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// withReaderGate holds the reader back until gate is closed.
func withReaderGate(gate <-chan struct{}) Option {
	return func(o *options) error {
		o.gate = gate
		return nil
	}
}

// requireKernel skips the test when it cannot load BPF programs.
func requireKernel(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: loading BPF programs needs root")
	}
	if _, err := os.Stat(btfPath); err != nil {
		t.Skipf("skipping: kernel BTF is missing: %v", err)
	}
}

// v2Mount returns where the cgroup v2 hierarchy is mounted.
func v2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(post); len(fs) > 0 && fs[0] == "cgroup2" {
			if f := strings.Fields(pre); len(f) >= 5 {
				return f[4], nil
			}
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// ownV2 returns the v2 cgroup path of this process ("/" or "/a/b").
func ownV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no v2 line in /proc/self/cgroup")
}

// testCgroup is a v2 cgroup made beneath this process's own.
type testCgroup struct {
	path string
	id   uint64
	fd   int
}

// newCgroup makes a v2 cgroup beneath the test's own v2 cgroup and removes it
// when the test ends.
func newCgroup(t testing.TB) *testCgroup {
	t.Helper()
	root, err := v2Mount()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	own, err := ownV2()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	path := filepath.Join(root, own, "sandtrail-test-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatalf("making cgroup: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat cgroup: %v", err)
	}
	fd, err := unix.Open(path, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening cgroup: %v", err)
	}
	cg := &testCgroup{path: path, id: st.Ino, fd: fd}
	t.Cleanup(func() {
		unix.Close(fd)
		removeCgroup(t, path)
	})
	return cg
}

// removeCgroup removes a cgroup once its processes are gone: an exited
// process can stay in cgroup.procs for a moment.
func removeCgroup(t testing.TB, path string) {
	var err error
	for range 100 {
		if err = unix.Rmdir(path); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("removing cgroup %s: %v", path, err)
}

// sysAttr starts a child directly inside cg, as uid when uid >= 0.
func (cg *testCgroup) sysAttr(uid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.fd}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	return a
}

// recorder starts a collector and collects every event it emits.
type recorder struct {
	c    *Collector
	evs  []*event.Event
	done chan struct{}
	// start, when not nil, holds the consumer back until it is closed.
	start chan struct{}
}

func startRecorder(t testing.TB, hold bool, opts ...Option) *recorder {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn, Output: os.Stderr})
	c, err := New(log, opts...)
	if err != nil {
		t.Fatalf("New() = %v, want a collector", err)
	}
	r := &recorder{c: c, done: make(chan struct{})}
	if hold {
		r.start = make(chan struct{})
	}
	go func() {
		defer close(r.done)
		if r.start != nil {
			<-r.start
		}
		for ev := range c.Events() {
			r.evs = append(r.evs, ev)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return r
}

// stop closes the collector and returns everything it emitted.
func (r *recorder) stop(t testing.TB) []*event.Event {
	t.Helper()
	if r.start != nil {
		close(r.start)
		r.start = nil
	}
	if err := r.c.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	<-r.done
	for _, ev := range r.evs {
		if err := ev.Validate(); err != nil {
			t.Errorf("event %+v: Validate() = %v", ev, err)
		}
		if _, err := event.Marshal(ev); err != nil {
			t.Errorf("event %+v: Marshal() = %v", ev, err)
		}
	}
	return r.evs
}

// inSession returns the events of session sid with the given kind.
func inSession(evs []*event.Event, sid, kind string) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if ev.SessionID == sid && ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// losses sums the collector.loss counts per lost kind.
func losses(evs []*event.Event) map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range evs {
		if ev.Kind == KindLoss {
			out[ev.Loss.LostKind] += ev.Loss.Count
		}
	}
	return out
}
