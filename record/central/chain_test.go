package central_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
)

// hostRecord is what one host publishes: its journal's entries and its
// newest signed checkpoint.
type hostRecord struct {
	entries []central.Entry
	cp      *journal.Checkpoint
	key     note.Verifier
}

// record writes n events into a real journal of host, signed by a fresh
// key, and reads them back as the host's sink would send them.
func record(t *testing.T, host string, n int) hostRecord {
	t.Helper()
	signer, vs := journaltest.Keys(t, host)
	dir := t.TempDir() + "/journal"
	j, err := journal.Open(dir, signer, journal.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		ev := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(i) * time.Millisecond), SessionID: host + "-s1",
			Kind: event.KindFileRead, Source: event.SourceKernel, Host: host,
			Proc: &event.Proc{Pid: 100, Exe: "/usr/bin/cat"}, File: &event.File{Path: fmt.Sprintf("/work/f%d", i)}}
		if err := j.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var es []central.Entry
	if err := journal.Scan(dir, 0, func(seq uint64, raw []byte) error {
		es = append(es, central.Entry{Host: host, Seq: seq, Raw: bytes.Clone(raw)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, err := vs.Verifier(signer.Name(), signer.KeyHash())
	if err != nil {
		t.Fatal(err)
	}
	return hostRecord{entries: es, cp: cp, key: v}
}

// publish writes the host's entries and checkpoint and verifies its chain.
func publish(t *testing.T, s *central.Store, host string, es []central.Entry, cp *journal.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	if cp != nil {
		if err := s.AddCheckpoint(ctx, host, cp.Text, cp.Size); err != nil {
			t.Fatal(err)
		}
	}
	write(t, s, es, 7)
	if err := s.Verify(ctx, host); err != nil {
		t.Fatal(err)
	}
}

// integrityAlerts are the store's integrity alerts, as "problem host seq"
// lines read back through the questions (an alert query).
func integrityAlerts(t *testing.T, s *central.Store) []string {
	t.Helper()
	var out []string
	err := s.EachEvent(context.Background(), query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}}, func(e *event.Event) error {
		if e.Alert.RuleID == central.IntegrityRule {
			out = append(out, e.Alert.Title+" "+e.Alert.Summary)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func chainOf(t *testing.T, s *central.Store, host string) central.Chain {
	t.Helper()
	cs, err := s.Chains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Host == host {
			return c
		}
	}
	t.Fatalf("no chain of %s in %+v", host, cs)
	return central.Chain{}
}

func wantAlert(t *testing.T, alerts []string, parts ...string) {
	t.Helper()
	for _, a := range alerts {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(a, p)
		}
		if ok {
			return
		}
	}
	t.Errorf("no integrity alert with %q among %q", parts, alerts)
}

// TestTamperChain publishes honest and dishonest records and checks
// that the honest ones verify with no alert and that each dishonest one
// raises its own alert naming the host and the seq.
func TestTamperChain(t *testing.T) {
	honest, tampered, forked, gapped, badsig, otherkey := record(t, "h1", 40), record(t, "h2", 40), record(t, "h3", 20),
		record(t, "h4", 30), record(t, "h5", 10), record(t, "h6", 10)
	fake := record(t, "fake", 5)
	keys := central.Keys{"h1": honest.key, "h2": tampered.key, "h3": forked.key, "h4": gapped.key, "h5": badsig.key, "h6": honest.key}
	s := openStore(t, newDatabase(t), central.WithKeys(keys), central.WithGapGrace(time.Nanosecond))

	publish(t, s, "h1", honest.entries, honest.cp)
	if c := chainOf(t, s, "h1"); c.Verified != 40 || c.Next != 40 || c.Broken != "" {
		t.Fatalf("honest host's chain = %+v, want verified 40", c)
	}
	if a := integrityAlerts(t, s); len(a) != 0 {
		t.Fatalf("an honest host raised %q", a)
	}

	// h2: entry 17 altered on its way (a path changed).
	es := append([]central.Entry(nil), tampered.entries...)
	es[17].Raw = bytes.Replace(es[17].Raw, []byte("/work/f17"), []byte("/work/fXX"), 1)
	publish(t, s, "h2", es, tampered.cp)
	// h3: entry 5 published again later with other bytes.
	publish(t, s, "h3", forked.entries, forked.cp)
	bad := forked.entries[5]
	bad.Raw = bytes.Replace(bad.Raw, []byte("/work/f5"), []byte("/work/f9"), 1)
	write(t, s, []central.Entry{bad}, 1)
	// h4: entries 12 and 13 never arrive.
	publish(t, s, "h4", append(append([]central.Entry(nil), gapped.entries[:12]...), gapped.entries[14:]...), gapped.cp)
	if err := s.Verify(context.Background(), "h4"); err != nil { // the gap stays open past the grace period
		t.Fatal(err)
	}
	// h5: its checkpoint's signature broken.
	cp := *badsig.cp
	cp.Text = flipSignature(t, cp.Text)
	publish(t, s, "h5", badsig.entries, &cp)
	// h6: signed by another key than the one the store has for h6.
	publish(t, s, "h6", otherkey.entries, otherkey.cp)
	// fake: a host the store has no key of.
	publish(t, s, "fake", fake.entries, fake.cp)

	alerts := integrityAlerts(t, s)
	wantAlert(t, alerts, "mismatch", "host h2 seq 0", "entries 0..39")
	wantAlert(t, alerts, "fork", "host h3 seq 5")
	wantAlert(t, alerts, "gap", "host h4 seq 12", "entries 12..13")
	wantAlert(t, alerts, "bad_signature", "host h5 seq 9")
	wantAlert(t, alerts, "unknown_key", "host h6 seq 9")
	wantAlert(t, alerts, "unknown_host", "host fake seq 4")
	if len(alerts) != 6 {
		t.Errorf("alerts = %d %q, want 6", len(alerts), alerts)
	}
	if c := chainOf(t, s, "h2"); c.Broken == "" || c.Verified != 0 {
		t.Errorf("tampered host's chain = %+v, want broken", c)
	}

	// The gap closes: the chain verifies, and the alert stays raised once.
	write(t, s, gapped.entries[12:14], 2)
	if err := s.Verify(context.Background(), "h4"); err != nil {
		t.Fatal(err)
	}
	if c := chainOf(t, s, "h4"); c.Verified != 30 {
		t.Errorf("h4 after the gap closed = %+v, want verified 30", c)
	}
	publish(t, s, "h2", es, tampered.cp) // everything again
	if again := integrityAlerts(t, s); len(again) != len(alerts) {
		t.Errorf("publishing again raised %d alerts, want the %d raised once", len(again), len(alerts))
	}
}

// TestCheckpointBeforeEntries checks that the order of arrival does not
// matter: a checkpoint before its entries, entries in reverse, two
// checkpoints one after the other.
func TestCheckpointBeforeEntries(t *testing.T) {
	r := record(t, "h1", 25)
	s := openStore(t, newDatabase(t), central.WithKeys(central.Keys{"h1": r.key}))
	ctx := context.Background()
	if err := s.AddCheckpoint(ctx, "h1", r.cp.Text, r.cp.Size); err != nil {
		t.Fatal(err)
	}
	for i := len(r.entries) - 1; i >= 0; i-- {
		write(t, s, r.entries[i:i+1], 1)
		if err := s.Verify(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
	}
	if c := chainOf(t, s, "h1"); c.Verified != 25 || c.Received != 25 {
		t.Errorf("chain = %+v, want verified 25", c)
	}
	if a := integrityAlerts(t, s); len(a) != 0 {
		t.Errorf("alerts %q", a)
	}
}

// flipSignature flips a bit of the note's last signature, keeping its
// form: "— name base64(keyhash || signature)".
func flipSignature(t *testing.T, msg []byte) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(msg), "\n"), "\n")
	last := lines[len(lines)-1]
	i := strings.LastIndexByte(last, ' ')
	sig, err := base64.StdEncoding.DecodeString(last[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	lines[len(lines)-1] = last[:i+1] + base64.StdEncoding.EncodeToString(sig)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestTamperCrossHost: an enrolled host publishes into another host's
// session (an event, a terminate that would end it), an integrity alert of
// its own making, and an event that says it is the other host's. None is
// indexed, each raises its own alert, and the victim's session and its
// account stay as its host recorded them.
func TestTamperCrossHost(t *testing.T) {
	victim, attacker := record(t, "h1", 10), record(t, "h2", 3)
	s := openStore(t, newDatabase(t), central.WithKeys(central.Keys{"h1": victim.key, "h2": attacker.key}))
	ctx := context.Background()
	publish(t, s, "h1", victim.entries, victim.cp)
	before, err := s.Sessions(ctx, query.Filter{Session: "h1-s1"})
	if err != nil || len(before) != 1 {
		t.Fatalf("Sessions = %v, %v", before, err)
	}
	forge := func(seq uint64, e *event.Event) central.Entry {
		if e.Host == "" {
			e.Host = "h2" // its own name: the store checks that too
		}
		e.V, e.Seq, e.TS = event.SchemaVersion, seq, t0.Add(1000*time.Hour)
		raw, err := event.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return central.Entry{Host: "h2", Seq: seq, Raw: raw}
	}
	code := int32(0)
	write(t, s, append(attacker.entries, forge(3, &event.Event{SessionID: "h1-s1", Kind: event.KindFileRead, Source: event.SourceKernel,
		File: &event.File{Path: "/etc/shadow"}}),
		forge(4, &event.Event{SessionID: "h1-s1", Kind: event.KindSessionTerminate, Source: event.SourceSession,
			Session: &event.Session{Op: "terminate", Reason: "normal", ExitStatus: &code}}),
		forge(5, &event.Event{SessionID: "h1-s1", Kind: event.KindAlert, Source: event.SourceRules,
			Alert: &event.Alert{RuleID: central.IntegrityRule, Title: "record integrity: mismatch (host h1)", Level: "critical"}}),
		forge(6, &event.Event{Host: "h1", SessionID: "h2-s9", Kind: event.KindFileRead, Source: event.SourceKernel,
			File: &event.File{Path: "/etc/passwd"}}),
		forge(7, &event.Event{Host: "h1", SessionID: "h2-s9", Kind: event.KindFileRead, Source: event.SourceKernel,
			File: &event.File{Path: "/etc/group"}})), 10)
	alerts := integrityAlerts(t, s)
	wantAlert(t, alerts, "session_conflict", "host h2 seq 3", "h1's")
	wantAlert(t, alerts, "forged_alert", "host h2 seq 5")
	wantAlert(t, alerts, "host_mismatch", "host h2 seq 6", `names host "h1"`)
	if len(alerts) != 3 { // seq 4's conflict is the same session's, seq 7's the same host's: one alert each
		t.Errorf("alerts %q, want 3", alerts)
	}
	if hits, err := s.Query(ctx, query.Filter{Session: "h2-s9"}); err != nil || len(hits) != 0 {
		t.Errorf("the events that name another host: %d indexed (%v), want none", len(hits), err)
	}
	after, err := s.Sessions(ctx, query.Filter{Session: "h1-s1"})
	if err != nil || sessionLines(after)[0] != sessionLines(before)[0] {
		t.Errorf("the victim's session changed:\nbefore %q\nafter  %q", sessionLines(before), sessionLines(after))
	}
	hits, err := s.Query(ctx, query.Filter{Session: "h1-s1"})
	if err != nil || len(hits) != 10 {
		t.Errorf("the victim's session has %d events (%v), want its own 10", len(hits), err)
	}
	sc, err := s.SessionChain(ctx, "h1-s1")
	if err != nil || sc.Host != "h1" || sc.Covered != 10 || sc.Problems != 0 {
		t.Errorf("SessionChain = %+v, %v; want h1's 10 entries covered, no problem of h1", sc, err)
	}
}

// TestEnrolLater: a host publishes before the store has its key, which
// raises unknown_host and vouches for nothing; once the store is opened
// with the key (the documented remedy: add <host>.pub and restart), its
// chain verifies from 0 at its next checkpoint (the store could not check
// the earlier ones, so it kept none), and its session is covered with no
// problem counted against it: the enrolment is not a tampering.
func TestEnrolLater(t *testing.T) {
	h := record(t, "h1", 10)
	dsn := newDatabase(t)
	ctx := context.Background()
	before := openStore(t, dsn)
	publish(t, before, "h1", h.entries, h.cp)
	wantAlert(t, integrityAlerts(t, before), "unknown_host", "host h1")
	if sc, err := before.SessionChain(ctx, "h1-s1"); err != nil || sc.Covered != 0 || sc.Problems != 0 {
		t.Errorf("SessionChain before the key = %+v, %v; want nothing covered and no tampering", sc, err)
	}
	before.Close()
	after := openStore(t, dsn, central.WithKeys(central.Keys{"h1": h.key}))
	publish(t, after, "h1", nil, h.cp) // its next checkpoint: here the same one again

	sc, err := after.SessionChain(ctx, "h1-s1")
	if err != nil || sc.Entries != 10 || sc.Covered != 10 || sc.Problems != 0 || sc.Broken != "" {
		t.Errorf("SessionChain after the key = %+v, %v; want its 10 entries covered and no problem", sc, err)
	}
}
