package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// ingestWorkload is one round: clients × batches × batch events.
type ingestWorkload struct {
	clients, batches, batch int
}

func (w ingestWorkload) events() int { return w.clients * w.batches * w.batch }

// ingestEvents builds one client's batches of tool.invoke events, the shape
// the orchestrator sends (about 300 bytes each once encoded).
func ingestEvents(w ingestWorkload, client, round int) [][]*event.Event {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := make([][]*event.Event, w.batches)
	for b := range out {
		evs := make([]*event.Event, w.batch)
		for i := range evs {
			evs[i] = &event.Event{V: event.SchemaVersion, TS: ts, SessionID: "bench-session",
				Kind: event.KindToolInvoke, Source: event.SourceAPI,
				EventID: fmt.Sprintf("r%d-c%d-b%d-e%d", round, client, b, i),
				Tool:    &event.Tool{Name: "bash", Status: "ok", DurationMS: 12, IO: event.IO{InputSummary: "ls -la /workspace/project/src && cat README.md | head -n 40", OutputSummary: "total 48 drwxr-xr-x 5 agent agent 4096 main.go go.mod README.md"}}}
		}
		out[b] = evs
	}
	return out
}

// ingestJournal opens a journal at the daemon's defaults (checkpoint every
// 4096 entries or every second, each signed).
func ingestJournal(b *testing.B, dir string) *journal.Journal {
	b.Helper()
	signer, _ := journaltest.Keys(b, "bench")
	j, err := journal.Open(filepath.Join(dir, "journal"), signer,
		journal.WithCheckpointEvery(4096), journal.WithCheckpointInterval(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// ingestRun runs send concurrently for each client and returns the time it
// took.
func ingestRun(b *testing.B, w ingestWorkload, round int, send func(client int, evs []*event.Event) error) time.Duration {
	b.Helper()
	work := make([][][]*event.Event, w.clients)
	for c := range work {
		work[c] = ingestEvents(w, c, round)
	}
	var wg sync.WaitGroup
	errs := make(chan error, w.clients)
	start := time.Now()
	for c := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, evs := range work[c] {
				if err := send(c, evs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// ingestCPU returns the CPU time (user and system) this process has used.
func ingestCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest pushes the same events through the socket (client →
// server → journal) and, as the baseline in the same run, straight into a
// journal in-process. It reports events per second for both and their ratio.
func BenchmarkIngest(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the socket accepts events from a root peer outside every session")
	}
	for _, w := range []ingestWorkload{
		{clients: 4, batches: 50, batch: 256},
		{clients: 16, batches: 13, batch: 256},
		{clients: 4, batches: 400, batch: 32},
		{clients: 4, batches: 2000, batch: 1},
	} {
		b.Run(fmt.Sprintf("clients=%d/batch=%d", w.clients, w.batch), func(b *testing.B) {
			dir := b.TempDir()
			direct := ingestJournal(b, filepath.Join(dir, "direct"))
			defer direct.Close()
			viaSock := ingestJournal(b, filepath.Join(dir, "socket"))
			defer viaSock.Close()
			srv := server.New(viaSock, server.NewTable())
			sock := filepath.Join(dir, "ingest.sock")
			ln, err := server.Listen(sock, 0o666)
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Shutdown(context.Background())
			clients := make([]*ingest.Client, w.clients)
			for i := range clients {
				if clients[i], err = ingest.Dial(sock); err != nil {
					b.Fatal(err)
				}
				defer clients[i].Close()
			}
			ctx := context.Background()

			// Wall time is what the target is about; CPU time (this
			// process: clients, server and journal) is reported too,
			// because on a shared machine it varies far less.
			var tDirect, tSock, cDirect, cSock time.Duration
			b.ResetTimer()
			for round := range b.N {
				c0 := ingestCPU()
				tDirect += ingestRun(b, w, round, func(_ int, evs []*event.Event) error {
					return direct.Append(ctx, evs...)
				})
				c1 := ingestCPU()
				tSock += ingestRun(b, w, round, func(c int, evs []*event.Event) error {
					return clients[c].Send(ctx, evs...)
				})
				cDirect += c1 - c0
				cSock += ingestCPU() - c1
			}
			b.StopTimer()
			n := float64(w.events() * b.N)
			b.ReportMetric(n/tDirect.Seconds(), "direct_ev/s")
			b.ReportMetric(n/tSock.Seconds(), "socket_ev/s")
			b.ReportMetric(tDirect.Seconds()/tSock.Seconds(), "socket/direct")
			b.ReportMetric(float64(cDirect.Microseconds())/n, "direct_cpu_µs/ev")
			b.ReportMetric(float64(cSock.Microseconds())/n, "socket_cpu_µs/ev")
			if st := srv.Stats(); st.Events != uint64(n) {
				b.Fatalf("server journaled %d events, want %.0f (stats %+v)", st.Events, n, st)
			}
		})
	}
}
