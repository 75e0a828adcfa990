package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// journalBenchEvents returns n events of several kinds, about 300 bytes
// each once encoded.
func journalBenchEvents(n int) []*event.Event {
	ts := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	out := make([]*event.Event, n)
	for i := range out {
		ev := &event.Event{TS: ts.Add(time.Duration(i)), SessionID: "bench-session", Host: "sandbox-1",
			EventID: fmt.Sprintf("bench-%d", i)}
		switch i % 4 {
		case 0:
			ev.Kind, ev.Source = event.KindExec, event.SourceKernel
			ev.Proc = &event.Proc{Pid: int32(1000 + i%30000), PPid: 999, UID: event.U32(1000), Comm: "npm",
				Exe: "/usr/bin/node", Argv: []string{"npm", "install", "lodash@^4.17.0"}, Cwd: "/home/agent/work"}
		case 1:
			ev.Kind, ev.Source = event.KindPkgInstall, event.SourceShim
			ev.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: "lodash", Requested: "^4.17.0", Resolved: "4.17.21",
				SourceURL: "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
				Hash:      "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg=="}
		case 2:
			ev.Kind, ev.Source = event.KindNetConnect, event.SourceKernel
			ev.Net = &event.Net{Op: "connect", Proto: "tcp", SrcIP: "10.0.3.2", SrcPort: uint16(30000 + i%30000), DstIP: "104.16.3.35", DstPort: 443}
		default:
			ev.Kind, ev.Source = event.KindFileWrite, event.SourceKernel
			ev.File = &event.File{Op: "write", Path: "/home/agent/work/node_modules/lodash/package.json", Result: event.I64(4096)}
		}
		out[i] = ev
	}
	return out
}

// journalCPU returns the CPU time (user + system, all threads) the process
// has used. On a shared machine it varies far less than wall time.
func journalCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// journalBaseline is the append baseline: the same concurrent appenders
// hand pre-encoded frames to one writer that gathers what is waiting, does
// one buffered write and one fdatasync, and acknowledges; no encoding,
// hashing or signing.
type journalBaseline struct {
	f    *os.File
	reqs chan journalBaselineReq
}

type journalBaselineReq struct {
	data []byte
	done chan error
}

func (w *journalBaseline) run() {
	var buf []byte
	var batch []journalBaselineReq
	for r := range w.reqs {
		buf = append(buf[:0], r.data...)
		batch = append(batch[:0], r)
	drain:
		for {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break drain
				}
				buf = append(buf, r.data...)
				batch = append(batch, r)
			default:
				break drain
			}
		}
		_, err := w.f.Write(buf)
		if err == nil {
			err = syscall.Fdatasync(int(w.f.Fd()))
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

// journalAppendRound appends evs from appenders goroutines in batches of
// batch events, through append.
func journalAppendRound(appenders, batch int, n int, appendFn func(lo, hi int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	per := n / appenders
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := a * per; lo < (a+1)*per; lo += batch {
				if err := appendFn(lo, min(lo+batch, (a+1)*per)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkJournalAppend measures durable appends with checkpoint signing
// at the defaults (every 4096 entries and every second) from concurrent
// appenders, against the raw write+fdatasync baseline of the same bytes.
func BenchmarkJournalAppend(b *testing.B) {
	for _, c := range []struct{ appenders, batch, n int }{{1, 1, 2048}, {16, 1, 8192}, {64, 1, 16384}, {8, 32, 32768}, {16, 64, 65536}} {
		b.Run(fmt.Sprintf("appenders=%d/batch=%d", c.appenders, c.batch), func(b *testing.B) {
			n := c.n
			s, _ := journaltest.Keys(b, "bench")
			evs := journalBenchEvents(n)
			// The baseline writes exactly the bytes the journal writes.
			frames := make([][]byte, n)
			var total int
			for i, ev := range evs {
				ev.V, ev.Seq = event.SchemaVersion, uint64(i)
				raw, err := event.Marshal(ev)
				if err != nil {
					b.Fatal(err)
				}
				frames[i] = append(make([]byte, 8, 8+len(raw)), raw...)
				total += len(frames[i])
			}
			dir := b.TempDir()
			bf, err := os.Create(filepath.Join(dir, "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer bf.Close()
			base := &journalBaseline{f: bf, reqs: make(chan journalBaselineReq)}
			go base.run()
			defer close(base.reqs)
			j, err := journal.Open(filepath.Join(dir, "journal"), s)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			var baseDur, jDur, baseCPU, jCPU time.Duration
			b.ResetTimer()
			for range b.N {
				c0 := journalCPU(b)
				t0 := time.Now()
				err := journalAppendRound(c.appenders, c.batch, n, func(lo, hi int) error {
					var data []byte
					for _, f := range frames[lo:hi] {
						data = append(data, f...)
					}
					done := make(chan error, 1)
					base.reqs <- journalBaselineReq{data, done}
					return <-done
				})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				c1 := journalCPU(b)
				err = journalAppendRound(c.appenders, c.batch, n, func(lo, hi int) error {
					return j.Append(context.Background(), evs[lo:hi]...)
				})
				if err != nil {
					b.Fatal(err)
				}
				baseDur += t1.Sub(t0)
				jDur += time.Since(t1)
				baseCPU += c1 - c0
				jCPU += journalCPU(b) - c1
			}
			b.StopTimer()
			events := float64(n * b.N)
			b.ReportMetric(float64(jCPU.Nanoseconds())/events, "cpu_ns/event")
			b.ReportMetric(float64(baseCPU.Nanoseconds())/events, "baseline_cpu_ns/event")
			b.ReportMetric(events/jDur.Seconds(), "events/s")
			b.ReportMetric(events/baseDur.Seconds(), "baseline_events/s")
			b.ReportMetric(baseDur.Seconds()/jDur.Seconds(), "ratio_vs_baseline")
			b.ReportMetric(float64(total)/float64(n), "bytes/event")
		})
	}
}

// BenchmarkJournalVerify measures Verify over a journal of 300k entries
// against a baseline of plain SHA-256 over the same segment bytes.
func BenchmarkJournalVerify(b *testing.B) {
	const n = 300_000
	s, v := journaltest.Keys(b, "bench")
	dir := b.TempDir()
	j, err := journal.Open(dir, s)
	if err != nil {
		b.Fatal(err)
	}
	evs := journalBenchEvents(n)
	for i := 0; i < n; i += 1024 {
		if err := j.Append(context.Background(), evs[i:min(i+1024, n)]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	buf := make([]byte, 1<<20)
	var baseDur, vDur, baseCPU, vCPU time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		c0 := journalCPU(b)
		t0 := time.Now()
		size = 0
		for _, p := range segs {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			k, err := io.CopyBuffer(h, f, buf)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			size += k
			h.Sum(nil)
		}
		t1 := time.Now()
		c1 := journalCPU(b)
		rep, err := journal.Verify(dir, v, nil)
		if err != nil || rep.Status != journal.StatusIntact || rep.Entries != n {
			b.Fatalf("Verify() = %+v, %v", rep, err)
		}
		baseDur += t1.Sub(t0)
		vDur += time.Since(t1)
		baseCPU += c1 - c0
		vCPU += journalCPU(b) - c1
	}
	b.StopTimer()
	events := float64(n * b.N)
	b.ReportMetric(float64(vCPU.Nanoseconds())/events, "cpu_ns/event")
	b.ReportMetric(float64(baseCPU.Nanoseconds())/events, "baseline_cpu_ns/event")
	b.ReportMetric(events/vDur.Seconds(), "events/s")
	b.ReportMetric(events/baseDur.Seconds(), "baseline_events/s")
	b.ReportMetric(baseDur.Seconds()/vDur.Seconds(), "ratio_vs_baseline")
	b.ReportMetric(float64(size)/n, "bytes/event")
}
