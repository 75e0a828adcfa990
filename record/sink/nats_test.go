package sink

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// streamSeqs reads every message of the stream and returns the count of
// each message id.
func streamIDs(t *testing.T, url, stream string) map[string]int {
	t.Helper()
	js := sinktest.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// TestNATSSinkRestart: a NATS sink publishes every entry to a real
// nats-server's JetStream stream, with Nats-Msg-Id host:seq:digest; the server
// is killed mid-stream and started again on its store; the stream ends
// with every entry exactly once.
func TestNATSSinkRestart(t *testing.T) {
	j, dir := testJournal(t)
	store := t.TempDir()
	srv := sinktest.StartNATS(t, 0, store)
	url := srv.ClientURL()
	port := srv.Addr().(*net.TCPAddr).Port
	ns, err := NewNATS(context.Background(), NATSConfig{URL: url, Host: "host.one"})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	r, _ := start(t, Config{Name: "nats", JournalDir: dir, CursorDir: t.TempDir(), Batch: 16, MaxBackoff: 200 * time.Millisecond}, ns, j)
	appendExecs(t, j, 100)
	waitLen(t, "cursor", 100, func() int { return int(r.Status().Cursor) })
	srv.Shutdown()
	srv.WaitForShutdown()
	appendExecs(t, j, 100) // while the server is down: the sink lags
	time.Sleep(300 * time.Millisecond)
	if st := r.Status(); st.Lag == 0 {
		t.Errorf("Status with the server down = %+v, want a lag", st)
	}
	sinktest.StartNATS(t, port, store)
	waitLen(t, "cursor after the restart", 200, func() int { return int(r.Status().Cursor) })
	ids := streamIDs(t, url, "SANDTRAIL")
	if len(ids) != 200 {
		t.Errorf("stream holds %d distinct ids, want 200", len(ids))
	}
	// Each id names its seq once (the digest is the line's: see
	// TestParseNATSMessage).
	seqs := map[string]int{}
	for id, n := range ids {
		host, rest, _ := strings.Cut(id, ":")
		seq, _, _ := strings.Cut(rest, ":")
		if host != "host_one" {
			t.Errorf("id %q names another host", id)
		}
		seqs[seq] += n
	}
	for i := range 200 {
		if n := seqs[strconv.Itoa(i)]; n != 1 {
			t.Errorf("seq %d stored %d times, want once", i, n)
		}
	}
}

func TestParseNATSMessage(t *testing.T) {
	line := []byte(`{"seq":42}`)
	d := digest(line)
	for _, c := range []struct {
		subject, id string
		want        NATSMessage
		err         string
	}{
		{Subject("web-1.example", "process.exec"), MsgID("web-1.example", 42, line), NATSMessage{Host: "web-1_example", Kind: "process_exec", Seq: 42}, ""},
		{Subject("h", "checkpoint"), checkpointID("h", 10, line), NATSMessage{Host: "h", Kind: "checkpoint", Seq: 9, Checkpoint: 10}, ""},
		{"sandtrail.h.process_exec", "other:42:" + d, NATSMessage{}, "does not name"},
		{"sandtrail.h.process_exec", "h-42", NATSMessage{}, "does not name"},
		{"sandtrail.h.process_exec", "h:042:" + d, NATSMessage{}, "want <host>:<seq>:<digest>"},
		{"sandtrail.h.process_exec", "h:checkpoint:3:" + d, NATSMessage{}, "needs both"},
		{"sandtrail.h.checkpoint", "h:3:" + d, NATSMessage{}, "needs both"},
		{"sandtrail.h.checkpoint", "h:checkpoint:0:" + d, NATSMessage{}, "size 0"},
		// Another line's digest, or none: the id was not made for this data
		// (a publisher that guessed a host's next seq cannot know its line).
		{"sandtrail.h.k", "h:42:" + digest([]byte(`{"seq":43}`)), NATSMessage{}, "not its data's"},
		{"sandtrail.h.k", "h:42", NATSMessage{}, "not its data's"},
		{"sandtrail.h", "h:1:" + d, NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"other.h.k", "h:1:" + d, NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"sandtrail..k", ":1:" + d, NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"sandtrail." + strings.Repeat("h", 129) + ".k", strings.Repeat("h", 129) + ":1:" + d, NATSMessage{}, "must be tokens"},
		{"sandtrail.bad\xffhost.k", "bad\xffhost:1:" + d, NATSMessage{}, "must be tokens"},
		{"sandtrail.a\x00b.k", "a\x00b:1:" + d, NATSMessage{}, "must be tokens"},
		// A host's id is never another's: "X-checkpoint" and X's checkpoints.
		{"sandtrail.h-checkpoint.k", checkpointID("h", 3, line), NATSMessage{}, "does not name"},
		{"sandtrail.h.k", "h:4611686018427387904:" + d, NATSMessage{}, "seq at most"},
		{"sandtrail.h.k", "h:9223372036854775807:" + d, NATSMessage{}, "seq at most"},
		{"sandtrail.h.k", "h:4611686018427387903:" + d, NATSMessage{Host: "h", Kind: "k", Seq: MaxSeq}, ""},
	} {
		got, err := ParseNATSMessage(c.subject, c.id, line)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseNATSMessage(%q, %q) error = %v, want %q", c.subject, c.id, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseNATSMessage(%q, %q) = %+v, %v, want %+v", c.subject, c.id, got, err, c.want)
		}
	}
}

func FuzzParseNATSMessage(f *testing.F) {
	f.Add("sandtrail.h.process_exec", "h:1:"+digest([]byte("x")), []byte("x"))
	f.Add("sandtrail.h.checkpoint", "h:checkpoint:9:"+digest([]byte("x")), []byte("x"))
	f.Fuzz(func(t *testing.T, subject, id string, data []byte) {
		m, err := ParseNATSMessage(subject, id, data)
		if err != nil {
			return
		}
		want := MsgID(m.Host, m.Seq, data)
		if m.Checkpoint != 0 {
			want = checkpointID(m.Host, m.Checkpoint, data)
		}
		if Subject(m.Host, m.Kind) != subject || want != id || m.Seq > MaxSeq {
			t.Errorf("ParseNATSMessage(%q, %q) = %+v, which does not give them back", subject, id, m)
		}
	})
}

// TestNATSHostNames: a sink refuses a host id whose subject token would
// not name it alone ("a.b" and "a_b" would share one) or that a subject
// cannot carry.
func TestNATSHostNames(t *testing.T) {
	for host, ok := range map[string]bool{"web-1.example": true, "h": true, "a_b": false, "a b": false, "": false,
		strings.Repeat("x", 129): false, "héllo": false, "a*": false, "a>": false} {
		if got := validHostName(host); got != ok {
			t.Errorf("validHostName(%q) = %v, want %v", host, got, ok)
		}
	}
	if _, err := NewNATS(context.Background(), NATSConfig{URL: "nats://127.0.0.1:1", Host: "a_b"}); err == nil || !strings.Contains(err.Error(), "host id") {
		t.Errorf("NewNATS(host a_b) error = %v, want the host id refused", err)
	}
}
