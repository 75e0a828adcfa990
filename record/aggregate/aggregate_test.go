package aggregate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/aggregate"
	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/central/centraltest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/sink"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// host is one host's journal and the sink runner that publishes it.
type host struct {
	name string
	j    *journal.Journal
	key  note.Verifier
	stop func()
}

func startHost(t *testing.T, name, url string) *host {
	t.Helper()
	signer, vs := journaltest.Keys(t, name)
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, signer, journal.WithHost(name), journal.WithCheckpointEvery(50))
	if err != nil {
		t.Fatal(err)
	}
	v, err := vs.Verifier(signer.Name(), signer.KeyHash())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := sink.NewNATS(context.Background(), sink.NATSConfig{URL: url, Host: name})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sink.NewRunner(sink.Config{Name: "nats", JournalDir: dir, CursorDir: t.TempDir(), Batch: 64}, ns, j)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	h := &host{name: name, j: j, key: v}
	h.stop = func() {
		cancel()
		<-done
		if err := j.Close(); err != nil { // its last checkpoint
			t.Error(err)
		}
		if err := r.Drain(context.Background()); err != nil {
			t.Error(err)
		}
		ns.Close()
	}
	return h
}

func (h *host) record(t *testing.T, session string, n int) {
	t.Helper()
	var evs []*event.Event
	for i := range n {
		evs = append(evs, &event.Event{V: event.SchemaVersion, TS: time.Now().UTC(), SessionID: session, Kind: event.KindExec,
			Source: event.SourceKernel, Host: h.name, Proc: &event.Proc{Pid: int32(1000 + i), Comm: "true", Argv: []string{"true", fmt.Sprint(i)}}})
	}
	if err := h.j.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
}

// runAggregator runs one aggregator until the returned stop is called.
func runAggregator(t *testing.T, url string, store *central.Store) (stop func()) {
	t.Helper()
	_, stop = startAggregator(t, aggregate.Config{URL: url, Batch: 100, VerifyEvery: 200 * time.Millisecond}, store)
	return stop
}

// startAggregator runs an aggregator of cfg over store until stop.
func startAggregator(t *testing.T, cfg aggregate.Config, store *central.Store) (a *aggregate.Aggregator, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := aggregate.New(ctx, cfg, store, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
		a.Close()
	}
}

// oneHost starts a NATS server, PostgreSQL, host h1 publishing to the
// server, and a store with opts and h1's key, for the test.
func oneHost(t *testing.T, opts ...central.Option) (url, dsn string, h *host, store *central.Store) {
	t.Helper()
	url = sinktest.StartNATS(t, 0, t.TempDir()).ClientURL()
	dsn = centraltest.StartPostgres(t).DSN()
	h = startHost(t, "h1", url)
	store, err := central.Open(context.Background(), dsn, append([]central.Option{central.WithKeys(central.Keys{"h1": h.key})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return url, dsn, h, store
}

// TestAggregatorResumes: two hosts publish while the aggregator is stopped
// and started again; the store ends with every entry of each host once,
// each host's chain verified to its last checkpoint, and no integrity
// alert.
func TestAggregatorResumes(t *testing.T) {
	srv := sinktest.StartNATS(t, 0, t.TempDir())
	url := srv.ClientURL()
	pg := centraltest.StartPostgres(t)
	h1, h2 := startHost(t, "h1", url), startHost(t, "h2", url)
	store, err := central.Open(context.Background(), pg.DSN(), central.WithKeys(central.Keys{"h1": h1.key, "h2": h2.key}))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stop := runAggregator(t, url, store)
	h1.record(t, "s1", 300)
	h2.record(t, "s2", 200)
	time.Sleep(300 * time.Millisecond)
	stop() // mid-stream
	h1.record(t, "s1", 300)
	stop = runAggregator(t, url, store)
	h2.record(t, "s2", 100)
	h1.stop()
	h2.stop()
	want := map[string]uint64{"h1": h1.j.Size(), "h2": h2.j.Size()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		chains, err := store.Chains(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ok := len(chains) == 2
		for _, c := range chains {
			ok = ok && c.Verified == want[c.Host] && c.Received == want[c.Host]
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chains %+v, want verified %v", chains, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	ss, err := store.Sessions(context.Background(), query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, s := range ss {
		got[s.ID] = s.Events
	}
	if got["s1"] != 600 || got["s2"] != 300 || len(got) != 2 {
		t.Errorf("sessions = %v, want s1 600, s2 300 (each entry once)", got)
	}
	alerts, err := store.Query(context.Background(), query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}})
	if err != nil || len(alerts) != 0 {
		t.Errorf("alerts = %d %v, want none", len(alerts), err)
	}
}

// TestAggregatorUnreadable: messages that no sink sends (an id of another
// form, a checkpoint line that is not one, a subject with no kind) are
// acknowledged and counted, raising an unreadable integrity alert for each
// span of seqs they fall in, and do not hold back the host's entries
// behind them.
func TestAggregatorUnreadable(t *testing.T) {
	url, _, h, store := oneHost(t)
	js := sinktest.JetStream(t, url)
	ctx := context.Background()
	h.record(t, "s1", 10)
	time.Sleep(200 * time.Millisecond) // the stream exists
	for _, m := range []struct{ subject, id, data string }{
		{"sandtrail.h1.process_exec", "nope", "{}"},
		{"sandtrail.h1.checkpoint", "h1:checkpoint:5:" + digest("not a checkpoint line"), "not a checkpoint line"},
		{"sandtrail.h1", "h1:99:" + digest("{}"), "{}"},
	} {
		msg := &nats.Msg{Subject: m.subject, Data: []byte(m.data), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, m.id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	h.record(t, "s1", 10)
	a, stop := startAggregator(t, aggregate.Config{URL: url, Batch: 100, VerifyEvery: 200 * time.Millisecond}, store)
	defer stop()
	h.stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var unreadable int
		err := store.EachEvent(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}}, func(e *event.Event) error {
			if strings.Contains(e.Alert.Title, central.ProblemUnreadable) {
				unreadable++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		chains, err := store.Chains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// h1's two are in one span of seqs: one alert; the subject with no
		// host is the store's own.
		if unreadable == 2 && a.Status().Unreadable == 3 && len(chains) == 1 && chains[0].Verified == h.j.Size() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("unreadable alerts %d, status %+v, chains %+v; want 2 alerts for 3 messages and h1 verified to %d",
				unreadable, a.Status(), chains, h.j.Size())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// digest is the digest a message id carries of data (sink.MsgID).
func digest(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:16])
}

// TestAggregatorIDsCannotBeTaken: host "evil", publishing only on its own
// subjects, sends messages under the message ids of the victim's next
// seqs and checkpoints, as it can guess them. None is the id the victim's
// sink sends (that carries its line's digest), so the stream keeps every
// entry of the victim's: the store receives and verifies all of them and
// raises nothing about the victim; evil's messages are unreadable.
func TestAggregatorIDsCannotBeTaken(t *testing.T) {
	url, _, h, store := oneHost(t, central.WithGapGrace(time.Second))
	js := sinktest.JetStream(t, url)
	ctx := context.Background()
	h.record(t, "s0", 1)
	time.Sleep(300 * time.Millisecond) // the stream exists
	base := h.j.Size()
	for seq := base; seq < base+400; seq++ {
		for _, id := range []string{
			fmt.Sprintf("h1:%d:%s", seq, digest("{}")), fmt.Sprintf("h1:checkpoint:%d:%s", seq+1, digest("{}")),
			fmt.Sprintf("h1-%d", seq), fmt.Sprintf("h1-checkpoint-%d", seq+1), // the old, guessable form
		} {
			msg := &nats.Msg{Subject: "sandtrail.evil.process_exec", Data: []byte("{}"), Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, id)
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := runAggregator(t, url, store)
	defer stop()
	h.record(t, "s1", 300)
	h.stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		chains, err := store.Chains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(chains, func(c central.Chain) bool { return c.Host == "h1" })
		if i >= 0 && chains[i].Received == h.j.Size() && chains[i].Verified == h.j.Size() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chains %+v, want h1 received and verified to %d", chains, h.j.Size())
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := store.EachEvent(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}}, func(e *event.Event) error {
		if strings.Contains(e.Alert.Title, "host h1") {
			t.Errorf("alert about the victim: %s: %s", e.Alert.Title, e.Alert.Summary)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAggregatorOutage: the store cannot take writes (its entries table is
// away, as in an outage) for twice the consumer's AckWait. The aggregator
// holds the batch and writes it again until the store is back: every
// entry is stored and verified, nothing is raised, and JetStream delivered
// no message a second time (no delivery is spent on the outage, so the
// 20-delivery backstop cannot drop what an outage held back).
func TestAggregatorOutage(t *testing.T) {
	ctx := context.Background()
	url, dsn, h, store := oneHost(t)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `ALTER TABLE entries RENAME TO entries_away`); err != nil {
		t.Fatal(err)
	}
	h.record(t, "s1", 30)
	h.stop()
	const ackWait = 3 * time.Second
	a, stop := startAggregator(t, aggregate.Config{URL: url, Batch: 100, VerifyEvery: 200 * time.Millisecond, AckWait: ackWait}, store)
	defer stop()
	time.Sleep(2 * ackWait)
	if st := a.Status(); st.LastError == "" || st.Added != 0 {
		t.Errorf("Status during the outage = %+v, want the store's error and nothing added", st)
	}
	if _, err := admin.Exec(ctx, `ALTER TABLE entries_away RENAME TO entries`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		chains, err := store.Chains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(chains) == 1 && chains[0].Received == h.j.Size() && chains[0].Verified == h.j.Size() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chains %+v after the outage, want h1's %d entries verified", chains, h.j.Size())
		}
		time.Sleep(100 * time.Millisecond)
	}
	alerts, err := store.Query(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}})
	if err != nil || len(alerts) != 0 {
		t.Errorf("alerts = %d %v, want none", len(alerts), err)
	}
	if st := a.Status(); st.Redelivered != 0 || st.Unreadable != 0 {
		t.Errorf("Status after the outage = %+v, want no message delivered twice and none unreadable", st)
	}
	if info := consumerInfo(t, url); info.NumAckPending != 0 {
		t.Errorf("consumer: %d pending an ack, want none", info.NumAckPending)
	}
}

// consumerInfo is the aggregators' consumer's info.
func consumerInfo(t *testing.T, url string) *jetstream.ConsumerInfo {
	t.Helper()
	js := sinktest.JetStream(t, url)
	c, err := js.Consumer(context.Background(), "SANDTRAIL", "sandtrail-aggregate")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
