package bench

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// BenchmarkSessionLifecycle measures a whole session around one short
// process (Create with memory, pids and cpu limits, the race-free Start,
// the main process's exit, terminate, Cleanup with the workdir deleted)
// against the baseline of running the same process with plain os/exec, in
// the same run, interleaved. It reports both medians and their ratio.
func BenchmarkSessionLifecycle(b *testing.B) {
	cgrouptest.RequireRoot(b)
	m, err := session.NewManager(hclog.NewNullLogger(), func(*event.Event) {}, session.WithRoot(b.TempDir()))
	if errors.Is(err, session.ErrNoCgroups) {
		b.Skipf("no cgroup2: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lim := event.Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}
	var base, sess []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))

		t0 = time.Now()
		s, err := m.Create(ctx, session.Spec{Limits: lim})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(ctx, exec.Command("true")); err != nil {
			sessionEnd(s)
			b.Fatal(err)
		}
		<-s.Done()
		if err := s.Cleanup(ctx, session.FSDeleted); err != nil {
			b.Fatal(err)
		}
		sess = append(sess, time.Since(t0))
	}
	b.StopTimer()
	mb, ms := sessionMedian(base), sessionMedian(sess)
	b.ReportMetric(float64(mb.Microseconds()), "us/exec")
	b.ReportMetric(float64(ms.Microseconds()), "us/session")
	b.ReportMetric(float64(ms)/float64(mb), "x-exec")
}

// BenchmarkSessionPauseResume measures one Pause and Resume of a session
// running a busy process, against the baseline of a SIGSTOP/SIGCONT pair
// sent to a busy process outside any session, in the same run.
func BenchmarkSessionPauseResume(b *testing.B) {
	cgrouptest.RequireRoot(b)
	m, err := session.NewManager(hclog.NewNullLogger(), func(*event.Event) {}, session.WithRoot(b.TempDir()))
	if err != nil {
		b.Skipf("no session manager: %v", err)
	}
	ctx := context.Background()
	s, err := m.Create(ctx, session.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sessionEnd(s) })
	if err := s.Start(ctx, exec.Command("sh", "-c", "while :; do :; done")); err != nil {
		b.Fatal(err)
	}
	other := exec.Command("sh", "-c", "while :; do :; done")
	if err := other.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		other.Process.Kill()
		other.Wait()
	}()
	var base, sess []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		other.Process.Signal(stopSignal)
		other.Process.Signal(contSignal)
		base = append(base, time.Since(t0))

		t0 = time.Now()
		if err := s.Pause(ctx, session.PauseAPI, "bench"); err != nil {
			b.Fatal(err)
		}
		if err := s.Resume(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		sess = append(sess, time.Since(t0))
	}
	b.StopTimer()
	mb, ms := sessionMedian(base), sessionMedian(sess)
	b.ReportMetric(float64(mb.Nanoseconds())/1e3, "us/sigstop-sigcont")
	b.ReportMetric(float64(ms.Nanoseconds())/1e3, "us/pause-resume")
	b.ReportMetric(float64(ms)/float64(mb), "x-signals")
}

// sessionEnd terminates and removes a benchmark's session, whatever state
// it is in.
func sessionEnd(s *session.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Terminate(ctx, session.ReasonAPI, nil)
	s.Cleanup(ctx, session.FSDeleted)
}

func sessionMedian(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

var (
	stopSignal = syscall.SIGSTOP
	contSignal = syscall.SIGCONT
)
