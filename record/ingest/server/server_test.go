package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"golang.org/x/mod/sumdb/note"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root peer outside every session may send without a session cgroup")
	}
}

func toolEvent(session, id string) string {
	return fmt.Sprintf(`{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":%q,"kind":"tool.invoke","source":"api","event_id":%q,"tool":{"name":"bash","status":"ok"}}`, session, id)
}

// TestBadFrames sends malformed, oversized and garbage frames and checks
// that each gets an error reply, is counted, and that the server keeps
// serving.
func TestBadFrames(t *testing.T) {
	needRoot(t)
	j, jdir := journaltest.Open(t)
	srv := New(j, NewTable(), WithIdleTimeout(time.Minute))
	sock := startServer(t, srv)

	header := func(n uint32) []byte {
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, n)
		return b
	}
	frame := func(p string) []byte { return append(header(uint32(len(p))), p...) }
	tests := []struct {
		name      string
		raw       []byte
		wantCode  ingest.Code
		counter   func(Stats) uint64
		wantReply bool
	}{
		{name: "not json", raw: frame("hello"), wantCode: ingest.CodeMalformed, counter: func(s Stats) uint64 { return s.Malformed }, wantReply: true},
		{name: "binary garbage", raw: frame("\x00\xff\xfe{{{"), wantCode: ingest.CodeMalformed, counter: func(s Stats) uint64 { return s.Malformed }, wantReply: true},
		{name: "empty frame", raw: header(0), wantCode: ingest.CodeMalformed, counter: func(s Stats) uint64 { return s.Malformed }, wantReply: true},
		{name: "wrong version", raw: frame(`{"v":7,"events":[{}]}`), wantCode: ingest.CodeMalformed, counter: func(s Stats) uint64 { return s.Malformed }, wantReply: true},
		{name: "oversized", raw: header(ingest.MaxFrame + 1), wantCode: ingest.CodeOversized, counter: func(s Stats) uint64 { return s.Oversized }, wantReply: true},
		{name: "huge length", raw: header(0xffffffff), wantCode: ingest.CodeOversized, counter: func(s Stats) uint64 { return s.Oversized }, wantReply: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.counter(srv.Stats())
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tt.raw); err != nil {
				t.Fatal(err)
			}
			b, err := ingest.ReadFrame(c, ingest.MaxFrame)
			if err != nil {
				t.Fatalf("reading reply: %v", err)
			}
			rep, err := ingest.DecodeReply(b)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Code != tt.wantCode {
				t.Errorf("reply = %+v, want code %s", rep, tt.wantCode)
			}
			if got := tt.counter(srv.Stats()); got != before+1 {
				t.Errorf("counter = %d, want %d", got, before+1)
			}
			if tt.wantCode == ingest.CodeMalformed {
				// The connection stays usable after a malformed frame.
				if err := ingest.WriteFrame(c, request(toolEvent("s", "after-"+strings.ReplaceAll(tt.name, " ", "-")))); err != nil {
					t.Fatal(err)
				}
				b, err := ingest.ReadFrame(c, ingest.MaxFrame)
				if err != nil {
					t.Fatalf("reading second reply: %v", err)
				}
				rep, _ := ingest.DecodeReply(b)
				if rep == nil || rep.Code != "" || rep.Results[0].Status != ingest.StatusOK {
					t.Errorf("reply after malformed frame = %+v, want ok", rep)
				}
			}
		})
	}

	t.Run("bad events in a good batch", func(t *testing.T) {
		before := srv.Stats().Rejected
		rep := roundTrip(t, sock, request(
			toolEvent("s", "good-1"),
			`{"v":1,"kind":"tool.invoke","evil":true}`,
			`{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"tool.invoke","tool":{"name":"x"},"event_id":"bad id with spaces"}`,
			`{"v":2,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"tool.invoke","tool":{"name":"x"}}`,
			`{"v":1,"ts":"2026-01-02T03:04:05Z","kind":"tool.invoke","tool":{"name":"no session"}}`,
			`{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"tool.invoke","tool":{"name":"`+strings.Repeat("<", event.MaxEncodedSize/4)+`"}}`,
			`"a string"`,
		))
		want := []ingest.Status{ingest.StatusOK, ingest.StatusRejected, ingest.StatusRejected, ingest.StatusRejected, ingest.StatusRejected, ingest.StatusRejected, ingest.StatusRejected}
		if rep.Code != "" || len(rep.Results) != len(want) {
			t.Fatalf("reply = %+v, want %d results", rep, len(want))
		}
		for i, w := range want {
			if rep.Results[i].Status != w {
				t.Errorf("result %d = %+v, want %s", i, rep.Results[i], w)
			}
		}
		if got := srv.Stats().Rejected; got != before+6 {
			t.Errorf("Stats().Rejected = %d, want %d", got, before+6)
		}
	})

	t.Run("a frame cut short does not hold the server", func(t *testing.T) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(append(header(100), "partial"...)); err != nil {
			t.Fatal(err)
		}
		// Meanwhile another client is served.
		rep := roundTrip(t, sock, request(toolEvent("s", "while-partial")))
		if rep.Code != "" || rep.Results[0].Status != ingest.StatusOK {
			t.Fatalf("reply = %+v, want ok", rep)
		}
	})

	n := 0
	for _, e := range journaled(t, jdir) {
		if e.Source != event.SourceAPI {
			t.Errorf("journaled %+v, want only api events", e)
		}
		n++
	}
	// after-* for the four malformed frames, good-1 and while-partial.
	if n != 6 {
		t.Errorf("journal holds %d events, want 6", n)
	}
}

// TestConnectionCap turns away connections over the cap with a busy reply.
func TestConnectionCap(t *testing.T) {
	needRoot(t)
	j, _ := journaltest.Open(t)
	srv := New(j, NewTable(), WithMaxConns(2))
	sock := startServer(t, srv)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Make sure both are being served before the third arrives.
	for i, c := range held {
		if err := ingest.WriteFrame(c, request(toolEvent("s", fmt.Sprintf("held-%d", i)))); err != nil {
			t.Fatal(err)
		}
		if _, err := ingest.ReadFrame(c, ingest.MaxFrame); err != nil {
			t.Fatal(err)
		}
	}
	// The server answers busy as soon as it accepts, before any request
	// (writing one might meet the closed socket first).
	third, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	b, err := ingest.ReadFrame(third, ingest.MaxFrame)
	if err != nil {
		t.Fatalf("reading the busy reply: %v", err)
	}
	rep, err := ingest.DecodeReply(b)
	if err != nil || rep.Code != ingest.CodeBusy {
		t.Fatalf("third connection reply = %+v, want code busy", rep)
	}
	if got := srv.Stats().Busy; got != 1 {
		t.Errorf("Stats().Busy = %d, want 1", got)
	}
	held[0].Close()
	// Once a slot frees up, a new connection is served. The server notices
	// the close asynchronously, so poll (this is not a timing assertion:
	// it only waits for the slot).
	for i := 0; ; i++ {
		rep, err = tryRoundTrip(sock, request(toolEvent("s", fmt.Sprintf("fourth-%d", i))))
		if err == nil && rep.Code == "" {
			break
		}
		if i > 1000 {
			t.Fatalf("no slot freed: %+v", rep)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDedup drops events whose id is already journaled, in one batch, across
// batches, and across a restart through RememberTail.
func TestDedup(t *testing.T) {
	needRoot(t)
	j, jdir := journaltest.Open(t)
	srv := New(j, NewTable())
	sock := startServer(t, srv)
	rep := roundTrip(t, sock, request(toolEvent("s", "d1"), toolEvent("s", "d2"), toolEvent("s", "d1")))
	want := []ingest.Status{ingest.StatusOK, ingest.StatusOK, ingest.StatusDuplicate}
	for i, w := range want {
		if rep.Results[i].Status != w {
			t.Fatalf("reply = %+v, want %v", rep, want)
		}
	}
	rep = roundTrip(t, sock, request(toolEvent("s", "d2"), toolEvent("s", "d3")))
	if rep.Results[0].Status != ingest.StatusDuplicate || rep.Results[1].Status != ingest.StatusOK {
		t.Fatalf("reply = %+v, want duplicate, ok", rep)
	}

	// A new server over the same journal knows the ids from the tail.
	srv2 := New(j, NewTable())
	n, err := srv2.RememberTail(j.Size(), 100, func(from uint64, fn func(uint64, []byte) error) error {
		return journal.Scan(jdir, from, fn)
	})
	if err != nil || n != 3 {
		t.Fatalf("RememberTail = %d, %v, want 3", n, err)
	}
	sock2 := startServer(t, srv2)
	rep = roundTrip(t, sock2, request(toolEvent("s", "d1"), toolEvent("s", "d4")))
	if rep.Results[0].Status != ingest.StatusDuplicate || rep.Results[1].Status != ingest.StatusOK {
		t.Fatalf("reply after restart = %+v, want duplicate, ok", rep)
	}
	if got := len(journaled(t, jdir)); got != 4 {
		t.Errorf("journal holds %d events, want 4", got)
	}
}

// TestSpoolReplay: with the daemon down Send spools; once it is up, Replay
// delivers each event exactly once, and replaying again adds nothing.
func TestSpoolReplay(t *testing.T) {
	needRoot(t)
	dir := publicDir(t)
	sock := dir + "/ingest.sock"
	spool := dir + "/spool"
	c, err := ingest.Dial(sock, ingest.WithSpool(spool, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var sent []string
	for b := range 3 {
		var evs []*event.Event
		for i := range 5 {
			evs = append(evs, &event.Event{SessionID: "spool-s", Kind: event.KindToolInvoke,
				Tool: &event.Tool{Name: fmt.Sprintf("t-%d-%d", b, i)}})
		}
		err := c.Send(ctx, evs...)
		if !errors.Is(err, ingest.ErrSpooled) {
			t.Fatalf("Send with the daemon down = %v, want ErrSpooled", err)
		}
		for _, e := range evs {
			sent = append(sent, e.EventID)
		}
	}
	if n, err := c.Spooled(); err != nil || n != 3 {
		t.Fatalf("Spooled() = %d, %v, want 3", n, err)
	}
	ents, _ := os.ReadDir(spool)
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("spool file %s mode = %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}

	j, jdir := journaltest.Open(t)
	srv := New(j, NewTable())
	ln, err := Listen(sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	if err := c.Replay(ctx); err != nil {
		t.Fatalf("Replay = %v", err)
	}
	if n, _ := c.Spooled(); n != 0 {
		t.Fatalf("Spooled() after Replay = %d, want 0", n)
	}
	// Put a copy of an already delivered batch back, as if a crash had
	// come between the ack and the delete, and replay twice.
	payload, err := ingest.EncodeRequest([]*event.Event{{V: 1, TS: time.Now(), SessionID: "spool-s", Kind: event.KindToolInvoke,
		Source: event.SourceAPI, EventID: sent[0], Tool: &event.Tool{Name: "t-0-0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spool+"/00000000000000000001-0-0-x.batch", payload, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Replay(ctx); err != nil {
			t.Fatalf("Replay = %v", err)
		}
	}
	got := map[string]int{}
	for _, e := range journaled(t, jdir) {
		got[e.EventID]++
	}
	for _, id := range sent {
		if got[id] != 1 {
			t.Errorf("event %s journaled %d times, want 1", id, got[id])
		}
	}
	if len(got) != len(sent) {
		t.Errorf("journal holds %d distinct events, want %d", len(got), len(sent))
	}
	if st := srv.Stats(); st.Duplicates != 1 {
		t.Errorf("Stats().Duplicates = %d, want 1", st.Duplicates)
	}
}

// TestCrashKeepsAcked kills the daemon (a real separate process) with
// SIGKILL while four clients stream events, restarts it, and checks that
// every acknowledged event is in the journal exactly once and that the
// journal verifies.
func TestCrashKeepsAcked(t *testing.T) {
	needRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := publicDir(t)
	sock := dir + "/ingest.sock"
	jdir := dir + "/journal"
	keyFile, vkey := testKey(t, dir)
	start := func() *exec.Cmd {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), envRole+"=daemon", envSock+"="+sock, envJournal+"="+jdir, envKey+"="+keyFile)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("daemon did not start: %q, %v", buf, err)
		}
		return cmd
	}
	d := start()

	const clients = 4
	var (
		mu      sync.Mutex
		acked   = map[string]bool{}
		all     [][]*event.Event // every batch attempted
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		ackedCh = make(chan struct{}, 1<<16)
	)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ingest.Dial(sock, ingest.WithTimeout(5*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				var evs []*event.Event
				for i := range 50 {
					evs = append(evs, &event.Event{SessionID: "crash", Kind: event.KindToolInvoke,
						Tool: &event.Tool{Name: fmt.Sprintf("w%d-b%d-e%d", w, b, i)}})
				}
				err := c.Send(context.Background(), evs...)
				mu.Lock()
				all = append(all, evs)
				if err == nil {
					for _, e := range evs {
						acked[e.EventID] = true
					}
				}
				mu.Unlock()
				if err == nil {
					select {
					case ackedCh <- struct{}{}:
					default:
					}
				} else {
					time.Sleep(time.Millisecond) // daemon down: do not spin
				}
			}
		}()
	}
	// Kill once a good number of batches has been acknowledged.
	for range 40 {
		<-ackedCh
	}
	// A checkpoint shipped off-host before the crash: the journal must
	// still extend it afterwards.
	var held [][]byte
	if cp, err := os.ReadFile(jdir + "/checkpoints/latest"); err == nil {
		held = append(held, cp)
	}
	if err := d.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.Wait()
	// Keep the clients failing against the dead daemon for a moment.
	for range 20 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	if nAcked == 0 {
		t.Fatal("no batch was acknowledged before the kill")
	}

	// Restart: the journal recovers, and every acknowledged event is there.
	d = start()
	seen := map[string]int{}
	for _, e := range journaled(t, jdir) {
		if e.Source != event.SourceJournal { // not journal.recovered
			seen[e.EventID]++
		}
	}
	lost := 0
	for id := range acked {
		if seen[id] == 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged events lost in the crash", lost, nAcked)
	}
	t.Logf("%d events acknowledged before the kill, %d journaled after restart, %d checkpoints held", nAcked, len(seen), len(held))

	// Re-send every batch ever attempted, as clients replaying their spools
	// would: nothing may be duplicated.
	c, err := ingest.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, evs := range all {
		if err := c.Send(context.Background(), evs...); err != nil {
			t.Fatalf("re-sending after restart: %v", err)
		}
	}
	c.Close()
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("daemon exited with %v after SIGTERM", err)
	}

	seen = map[string]int{}
	for _, e := range journaled(t, jdir) {
		if e.Source != event.SourceJournal { // not journal.recovered
			seen[e.EventID]++
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s journaled %d times", id, n)
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := journal.Verify(jdir, note.VerifierList(v), held, journal.DecodeEvents())
	if err != nil {
		t.Fatalf("journal.Verify = %v", err)
	}
	if rep.Status != journal.StatusIntact || rep.Held != len(held) {
		t.Errorf("journal.Verify = %+v, want intact with %d held checkpoints", rep, len(held))
	}
	if want := len(all) * 50; len(seen) != want {
		t.Errorf("journal holds %d distinct events after re-sending, want %d", len(seen), want)
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		prepare func(path string) func()
		wantErr error // nil: success; errAny: any error
	}{
		{name: "fresh, parent created", prepare: func(string) func() { return func() {} }},
		{name: "stale socket replaced", prepare: func(path string) func() {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return func() {}
		}},
		{name: "live socket kept", prepare: func(path string) func() {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			return func() { ln.Close() }
		}, wantErr: ErrInUse},
		{name: "regular file kept", prepare: func(path string) func() {
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}, wantErr: errAny},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("%s/%d/sub/ingest.sock", dir, i)
			if i > 0 {
				if err := os.MkdirAll(path[:strings.LastIndex(path, "/")], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			defer tt.prepare(path)()
			ln, err := Listen(path, 0o666)
			if tt.wantErr != nil {
				if err == nil || tt.wantErr != errAny && !errors.Is(err, tt.wantErr) {
					t.Fatalf("Listen(%s) = %v, want %v", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen = %v", err)
			}
			defer ln.Close()
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o666 {
				t.Fatalf("socket mode = %v, %v, want 0666", fi.Mode().Perm(), err)
			}
			di, err := os.Stat(path[:strings.LastIndex(path, "/")])
			if i == 0 && (err != nil || di.Mode().Perm() != 0o755) {
				t.Fatalf("socket directory mode = %v, %v, want 0755", di.Mode().Perm(), err)
			}
		})
	}
}

var errAny = errors.New("any error")

// TestClientRejected: events the daemon refuses for good come back as
// ErrRejected and are not spooled; the rest of the batch is stored.
func TestClientRejected(t *testing.T) {
	needRoot(t)
	j, jdir := journaltest.Open(t)
	sock := startServer(t, New(j, NewTable()))
	spool := t.TempDir()
	c, err := ingest.Dial(sock, ingest.WithSpool(spool, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok := &event.Event{SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "ok"}}
	var evs []*event.Event
	for range 7 { // no peer may send an alert: they are the rules'
		evs = append(evs, &event.Event{SessionID: "s", Kind: event.KindAlert, Alert: &event.Alert{RuleID: "x", Title: "x", Level: "high"}})
	}
	err = c.Send(context.Background(), append(evs, ok)...)
	if !errors.Is(err, ingest.ErrRejected) || errors.Is(err, ingest.ErrSpooled) || !strings.Contains(err.Error(), "7 events") {
		t.Fatalf("Send = %v, want ErrRejected naming 7 events, nothing spooled", err)
	}
	if n, _ := c.Spooled(); n != 0 {
		t.Errorf("Spooled() = %d, want 0", n)
	}
	got := journaled(t, jdir)
	if len(got) != 1 || got[0].EventID != ok.EventID {
		t.Errorf("journal = %v, want only the tool event", got)
	}
}
