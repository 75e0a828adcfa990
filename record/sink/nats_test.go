package sink

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// streamSeqs reads every message of the stream and returns the count of
// each message id.
func streamIDs(t *testing.T, url, stream string) map[string]int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
// nats-server's JetStream stream, with Nats-Msg-Id host-seq; the server
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
	for i := range 200 {
		if n := ids[MsgID("host.one", uint64(i))]; n != 1 {
			t.Errorf("seq %d stored %d times, want once", i, n)
		}
	}
	if MsgID("host.one", 7) != "host_one-"+strconv.Itoa(7) {
		t.Errorf("MsgID = %q", MsgID("host.one", 7))
	}
}

func TestParseNATSMessage(t *testing.T) {
	for _, c := range []struct {
		subject, id string
		want        NATSMessage
		err         string
	}{
		{Subject("web-1.example", "process.exec"), MsgID("web-1.example", 42), NATSMessage{Host: "web-1_example", Kind: "process_exec", Seq: 42}, ""},
		{Subject("h", "checkpoint"), checkpointID("h", 10), NATSMessage{Host: "h", Kind: "checkpoint", Seq: 9, Checkpoint: 10}, ""},
		{"sandtrail.h.process_exec", "other-42", NATSMessage{}, "does not name"},
		{"sandtrail.h.process_exec", "h-042", NATSMessage{}, "want <host>-<seq>"},
		{"sandtrail.h.process_exec", "h-checkpoint-3", NATSMessage{}, "needs both"},
		{"sandtrail.h.checkpoint", "h-3", NATSMessage{}, "needs both"},
		{"sandtrail.h.checkpoint", "h-checkpoint-0", NATSMessage{}, "size 0"},
		{"sandtrail.h", "h-1", NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"other.h.k", "h-1", NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"sandtrail..k", "-1", NATSMessage{}, "want sandtrail.<host>.<kind>"},
		{"sandtrail." + strings.Repeat("h", 129) + ".k", strings.Repeat("h", 129) + "-1", NATSMessage{}, "must be tokens"},
		{"sandtrail.bad\xffhost.k", "bad\xffhost-1", NATSMessage{}, "must be tokens"},
		{"sandtrail.a\x00b.k", "a\x00b-1", NATSMessage{}, "must be tokens"},
		{"sandtrail.h.k", "h-9223372036854775808", NATSMessage{}, "want <host>-<seq>"},
		{"sandtrail.h.k", "h-9223372036854775807", NATSMessage{Host: "h", Kind: "k", Seq: 9223372036854775807}, ""},
	} {
		got, err := ParseNATSMessage(c.subject, c.id)
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
	f.Add("sandtrail.h.process_exec", "h-1")
	f.Add("sandtrail.h.checkpoint", "h-checkpoint-9")
	f.Fuzz(func(t *testing.T, subject, id string) {
		m, err := ParseNATSMessage(subject, id)
		if err != nil {
			return
		}
		want := MsgID(m.Host, m.Seq)
		if m.Checkpoint != 0 {
			want = checkpointID(m.Host, m.Checkpoint)
		}
		if Subject(m.Host, m.Kind) != subject || want != id {
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
