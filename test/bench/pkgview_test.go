package bench

import (
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
)

// BenchmarkWatcherAdd measures what the daemon's package-view Watcher
// costs each journaled event (it is fed from the journal's append path):
// a session's mix of forks, execs, exits, file writes and connections, per
// event, against the baseline of the same events' Category (a map-free
// switch the journal path already pays).
func BenchmarkWatcherAdd(b *testing.B) {
	uid := uint32(1000)
	mk := func(i int) *event.Event {
		pid := int32(1000 + i%500)
		e := &event.Event{V: event.SchemaVersion, Seq: uint64(i + 1), TS: time.Unix(1, 0), SessionID: "s1", Source: event.SourceKernel,
			Proc: &event.Proc{Pid: pid, PPid: pid - 1, UID: &uid}}
		switch i % 5 {
		case 0:
			e.Kind = event.KindFork
		case 1:
			e.Kind, e.Proc.Exe, e.Proc.Argv, e.Proc.Cwd = event.KindExec, "/usr/bin/true", []string{"true"}, "/w"
		case 2:
			e.Kind, e.File = event.KindFileWrite, &event.File{Op: "write", Path: "/w/out"}
		case 3:
			e.Kind, e.Net = event.KindNetConnect, &event.Net{Op: "connect", Proto: "tcp", DstIP: "127.0.0.1", DstPort: 80}
		default:
			e.Kind = event.KindExit
		}
		return e
	}
	evs := make([]*event.Event, 10000)
	for i := range evs {
		evs[i] = mk(i)
	}
	b.Run("baseline", func(b *testing.B) {
		n := 0
		for i := range b.N {
			if evs[i%len(evs)].Category() == "pkg" {
				n++
			}
		}
		_ = n
	})
	b.Run("watcher", func(b *testing.B) {
		w := pkgview.NewWatcher(pkgview.WithShimDir("/usr/local/lib/sandtrail/shims"))
		for i := range b.N {
			w.Add(evs[i%len(evs)])
		}
	})
}
