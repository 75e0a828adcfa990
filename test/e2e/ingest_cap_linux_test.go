package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/ingest"
)

// holdConnsHelper N DIR: opens N connections to the session's ingest
// socket, pings each (a request without events, which the server answers
// "malformed" on a connection it admitted and "busy" on one it turned
// away), keeps the admitted ones, writes "admitted=A busy=B session=ID" to
// DIR/ready and holds them until DIR/release exists.
func holdConnsHelper(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: holdconns N DIR")
		return 2
	}
	var n int
	if _, err := fmt.Sscan(args[0], &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sock := os.Getenv("SANDTRAIL_SOCKET")
	var held []net.Conn
	busy := 0
	for range n {
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdconns:", err)
			return 3
		}
		_ = ingest.WriteFrame(c, []byte(`{"v":1,"events":[]}`)) // a busy server may have closed already
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, err := ingest.ReadFrame(c, ingest.MaxFrame)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdconns: reading the reply to a ping:", err)
			return 3
		}
		rep, err := ingest.DecodeReply(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdconns:", err)
			return 3
		}
		if rep.Code == ingest.CodeBusy {
			busy++
			c.Close()
			continue
		}
		_ = c.SetReadDeadline(time.Time{})
		held = append(held, c)
	}
	counts := fmt.Sprintf("admitted=%d busy=%d session=%s", len(held), busy, os.Getenv("SANDTRAIL_SESSION_ID"))
	ready := filepath.Join(args[1], "ready")
	if err := os.WriteFile(ready+".tmp", []byte(counts), 0o644); err != nil || os.Rename(ready+".tmp", ready) != nil {
		fmt.Fprintln(os.Stderr, "holdconns: writing", ready, err)
		return 3
	}
	fmt.Println(counts)
	code := waitFileHelper([]string{filepath.Join(args[1], "release")})
	for _, c := range held {
		c.Close()
	}
	return code
}

// TestIngestCapAgentCannotStarveRoot: the agent
// (nobody, in a real session) holds 300 connections to the ingest socket;
// it gets its per-peer cap of them (ingest.max_conns_per_peer, 32), the
// rest are turned away busy and logged, and root's `sandtrail emit`
// meanwhile is admitted and journaled, not spooled.
func TestIngestCapAgentCannotStarveRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The agent writes ready into its workdir ("."), where it waits for
	// release: its /tmp is private.
	done := e.startRun(append([]string{"--user", "nobody", "--"}, helperCmd("holdconns", "300", ".")...)...)
	defer e.release("release")
	var counts []byte
	for deadline := time.Now().Add(waitBound); counts == nil; time.Sleep(20 * time.Millisecond) {
		select {
		case rr := <-done:
			t.Fatalf("session ended before holding its connections: %v\nstdout:\n%s\nstderr:\n%s", rr.err, rr.r.stdout, rr.r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not report its connections within a minute")
		}
		for _, p := range e.inWorkdirs("ready") {
			counts, _ = os.ReadFile(p)
		}
	}
	var admitted, busy int
	var sid string
	if _, err := fmt.Sscanf(string(counts), "admitted=%d busy=%d session=%s", &admitted, &busy, &sid); err != nil {
		t.Fatalf("parsing %q: %v", counts, err)
	}

	// Root's emit while the agent holds everything it could get.
	emit := e.cmd("emit", "tool", "--session", sid, "--name", "cap-check", "--status", "ok")
	var stderr strings.Builder
	emit.Stderr = &stderr
	out, err := emit.Output()
	id := strings.TrimSpace(string(out))
	if err != nil || strings.Contains(stderr.String(), "spooled") || !ingest.ValidEventID(id) {
		t.Errorf("root's sandtrail emit while the agent holds connections: %v, stdout %q, stderr %q; want the event admitted, not spooled",
			err, out, stderr.String())
	}
	if admitted != 32 || busy != 268 {
		t.Errorf("agent's connections: %d admitted, %d busy, want 32 and 268 (its per-peer cap)", admitted, busy)
	}

	e.release("release")
	rr := <-done
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if r := rr.r; r.code != 0 || r.summary.SessionID != sid {
		t.Errorf("sandtrail run: exit %d, session %q, want 0, %q\nstderr:\n%s", r.code, r.summary.SessionID, sid, r.stderr)
	}
	if l := rr.r.stderr; !strings.Contains(l, "peer holds its cap of connections") || !strings.Contains(l, `peer="session `+sid+`"`) {
		t.Errorf("run's log does not report the agent's refused connections:\n%s", l)
	}
	found := false
	for _, ev := range kinds(e.events(sid), "tool.invoke") {
		if ev.EventID == id && ev.Tool != nil && ev.Tool.Name == "cap-check" && ev.Source == "api" {
			found = true
		}
	}
	if !found {
		t.Errorf("root's tool.invoke %s is not journaled in session %s", id, sid)
	}
	if spooled, _ := filepath.Glob(filepath.Join(e.data, "spool", "*")); len(spooled) != 0 {
		t.Errorf("spool holds %q, want nothing", spooled)
	}
	e.verify()
}
