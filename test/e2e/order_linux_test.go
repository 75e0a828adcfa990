package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestRunCauseBeforeEffect: in a session of more than 1,000 execs, among
// them package managers started through their shims (the shim execs the
// manager, whose interpreter execs more) and fresh binaries the hash cache
// has never seen, the journal never holds an event of a process that
// happened after its exec before that exec, nor a child's exec before its
// parent's: live rules (shim_bypass) read the journal in that order.
func TestRunCauseBeforeEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `
for i in $(seq 1 8); do
	pip --version >/dev/null 2>&1
	npm --version >/dev/null 2>&1
	cp /bin/true ./fresh$i && ./fresh$i && echo x >./out$i
done
i=0
while [ $i -lt 330 ]; do
	sh -c 'sh -c "/bin/true >./nested"'
	i=$((i+1))
done
`
	r := e.run("--user", "nobody", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\n%s", r.code, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	// The newest exec of each pid so far, with its position.
	type execAt struct {
		seq int
		ts  time.Time
	}
	last := map[int32]execAt{}
	execs, checked := 0, 0
	for i, ev := range evs {
		if ev.Proc == nil || ev.Source != event.SourceKernel {
			continue
		}
		p := ev.Proc
		switch ev.Kind {
		case event.KindExec:
			execs++
			// The parent's exec, when it happened in the session before
			// this one, is already in the journal.
			for j := i + 1; j < len(evs); j++ {
				later := evs[j]
				if later.Kind == event.KindExec && later.Proc != nil && later.Proc.Pid == p.PPid && later.TS.Before(ev.TS) {
					t.Errorf("exec of pid %d (%s, seq %d) is before its parent %d's earlier exec (%s, seq %d)",
						p.Pid, p.Exe, ev.Seq, p.PPid, later.Proc.Exe, later.Seq)
					break
				}
			}
			last[p.Pid] = execAt{i, ev.TS}
		case event.KindFileCreate, event.KindFileWrite, event.KindFileRead, event.KindNetConnect, event.KindNetSend:
			checked++
			// No later exec of the same pid may have happened before it.
			for j := i + 1; j < len(evs); j++ {
				later := evs[j]
				if later.Kind == event.KindExec && later.Proc != nil && later.Proc.Pid == p.Pid && later.TS.Before(ev.TS) {
					t.Errorf("%s of pid %d (seq %d, %s) is before the exec that came first (seq %d, %s)",
						ev.Kind, p.Pid, ev.Seq, ev.TS.Format(time.RFC3339Nano), later.Seq, later.TS.Format(time.RFC3339Nano))
					break
				}
			}
		}
	}
	if execs < 1000 {
		t.Errorf("%d execs recorded, want more than 1,000", execs)
	}
	if checked == 0 {
		t.Errorf("no file or network event to check")
	}
	t.Logf("%s", fmt.Sprintf("%d events, %d execs, %d file and network events checked", len(evs), execs, checked))
}
