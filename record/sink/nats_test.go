package sink

import (
	"context"
	"net"
	"strconv"
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
