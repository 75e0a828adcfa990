package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/resolver"
)

var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func openTemp(t *testing.T, opts ...Option) *Index {
	t.Helper()
	ix, err := Open(filepath.Join(t.TempDir(), "index.db"), opts...)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func entries(t testing.TB, evs []*event.Event) []Entry {
	t.Helper()
	out := make([]Entry, len(evs))
	for i, ev := range evs {
		ev.Seq = uint64(i)
		raw, err := event.Marshal(ev)
		if err != nil {
			t.Fatalf("Marshal(%d) error = %v", i, err)
		}
		out[i] = Entry{Seq: uint64(i), Raw: raw}
	}
	return out
}

// handcrafted builds a small record where each question has a known answer.
func handcrafted() []*event.Event {
	var evs []*event.Event
	at := 0
	add := func(sess, kind string, mod func(*event.Event)) {
		at++
		ev := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(at) * time.Second), SessionID: sess, Kind: kind, Source: event.SourceKernel}
		mod(ev)
		evs = append(evs, ev)
	}
	file := func(p string) func(*event.Event) {
		return func(e *event.Event) {
			e.File = &event.File{Op: "read", Path: p}
			e.Proc = &event.Proc{Pid: 7, Exe: "/bin/cat"}
		}
	}
	conn := func(d string) func(*event.Event) {
		return func(e *event.Event) { e.Net = &event.Net{Op: "connect", Domain: d, DstIP: "192.0.2.1", DstPort: 443} }
	}
	dns := func(d string) func(*event.Event) {
		return func(e *event.Event) { e.Net = &event.Net{Op: "dns", DNS: &event.DNS{Query: d + ".", QType: "A"}} }
	}
	pkg := func(eco, name, v string) func(*event.Event) {
		return func(e *event.Event) {
			e.Source = event.SourceShim
			e.Pkg = &event.Pkg{Ecosystem: eco, Name: name, Resolved: v}
		}
	}
	end := func(reason string, exit int32) func(*event.Event) {
		return func(e *event.Event) {
			e.Source = event.SourceSession
			e.Session = &event.Session{Op: "terminate", Reason: reason, ExitStatus: &exit}
		}
	}
	add("A", event.KindFileRead, file("/etc/ssh/sshd_config"))
	add("B", event.KindFileRead, file("/etc/sshd"))
	add("C", event.KindFileRead, file("/etc/ssh"))
	add("D", event.KindFileRead, file("/etc/ssh_config"))
	add("E", event.KindFileRename, func(e *event.Event) {
		e.File = &event.File{Op: "rename", Path: "/tmp/x", NewPath: "/home/agent/.ssh/id_rsa"}
	})
	add("A", event.KindNetConnect, conn("www.example.com"))
	add("B", event.KindNetConnect, conn("badexample.com"))
	add("C", event.KindNetDNS, dns("EXAMPLE.com"))
	add("D", event.KindNetDNS, dns("a.b.example.com"))
	add("E", event.KindNetConnect, conn("example.com.evil.net"))
	add("A", event.KindPkgInstall, pkg("npm", "lodash", "4.17.20"))
	add("B", event.KindPkgInstall, pkg("npm", "lodash", "4.17.21"))
	add("C", event.KindPkgInstall, pkg("npm", "lodash", "5.0.0"))
	add("D", event.KindPkgInstall, pkg("npm", "lodash", "4.16.9"))
	add("E", event.KindPkgInstall, pkg("pypi", "Typing_Extensions", "4.12.2"))
	add("F", event.KindPkgInstall, pkg("npm", "lodash-es", "4.17.20"))
	add("A", event.KindSessionTerminate, end("normal", 0))
	add("B", event.KindSessionTerminate, end("oom", 137))
	add("C", event.KindSessionTerminate, end("oomx", 1))
	add("D", event.KindSessionTerminate, end("timeout", 124))
	add("E", event.KindSessionTerminate, end("oom", 137))
	return evs
}

func mustParse(t *testing.T, a query.Args) query.Filter {
	t.Helper()
	f, err := query.Parse(a, t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("Parse(%+v) error = %v", a, err)
	}
	return f
}

func sessionIDs(ss []Session) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// TestFiveQuestions checks each question against a record whose answers are
// known, including the look-alikes that must not match.
func TestFiveQuestions(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	if err := ix.Add(ctx, entries(t, handcrafted())); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	tests := []struct {
		name string
		args query.Args
		want []string
	}{
		{"path prefix not sibling", query.Args{Path: "/etc/ssh"}, []string{"A", "C"}},
		{"path prefix trailing slash", query.Args{Path: "/etc/ssh/"}, []string{"A", "C"}},
		{"path exact file", query.Args{Path: "/etc/sshd"}, []string{"B"}},
		{"path glob star stays in dir", query.Args{Path: "/etc/ssh*"}, []string{"B", "C", "D"}},
		{"path glob double star", query.Args{Path: "/home/**/id_*"}, []string{"E"}},
		{"path rename old name", query.Args{Path: "/tmp"}, []string{"E"}},
		{"domain exact", query.Args{Domain: "example.com"}, []string{"C"}},
		{"domain suffix", query.Args{Domain: "*.example.com"}, []string{"A", "D"}},
		{"domain not badexample", query.Args{Domain: "badexample.com"}, []string{"B"}},
		{"package exact", query.Args{Package: "npm:lodash@4.17.20"}, []string{"A"}},
		{"package purl", query.Args{Package: "pkg:npm/lodash@4.17.20"}, []string{"A"}},
		{"package any version", query.Args{Package: "npm:lodash"}, []string{"A", "B", "C", "D"}},
		{"package caret range", query.Args{Package: "npm:lodash@^4.17.0"}, []string{"A", "B"}},
		{"package range boundary", query.Args{Package: "npm:lodash@>=4.16.9 <4.17.21"}, []string{"A", "D"}},
		{"package pypi normalized", query.Args{Package: "pypi:typing-extensions@4.12.2"}, []string{"E"}},
		{"reason oom not oomx", query.Args{Reason: "oom"}, []string{"B", "E"}},
		{"reason timeout", query.Args{Reason: "timeout"}, []string{"D"}},
		{"reason none", query.Args{Reason: "api"}, []string{}},
		{"session", query.Args{Session: "C"}, []string{"C"}},
		{"unknown session", query.Args{Session: "nope"}, []string{}},
		{"kind", query.Args{Kind: "net.dns"}, []string{"C", "D"}},
		{"pid", query.Args{Pid: "7"}, []string{"A", "B", "C", "D"}},
		{"path and reason", query.Args{Path: "/etc/ssh", Reason: "oomx"}, []string{"C"}},
		{"time window", query.Args{Since: "2026-11-29T08:00:06Z", Until: "2026-11-29T08:00:08Z"}, []string{"A", "B"}},
		{"limit", query.Args{Limit: "2"}, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.args)
			got, err := ix.Sessions(ctx, f)
			if err != nil {
				t.Fatalf("Sessions(%+v) error = %v", tt.args, err)
			}
			if ids := sessionIDs(got); !slices.Equal(ids, tt.want) {
				t.Errorf("Sessions(%+v) = %v, want %v", tt.args, ids, tt.want)
			}
		})
	}
}

func TestTimelineAndSummary(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	if err := ix.Add(ctx, entries(t, handcrafted())); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	f := mustParse(t, query.Args{Session: "B", Since: "2026-11-29T08:00:02Z", Until: "2026-11-29T08:00:18Z"})
	hits, err := ix.Query(ctx, f)
	if err != nil {
		t.Fatalf("Query() error = %v", err)
	}
	var kinds []string
	var seqs []uint64
	for _, h := range hits {
		kinds = append(kinds, h.Kind)
		seqs = append(seqs, h.Seq)
		if h.SessionID != "B" {
			t.Errorf("Query(session B) returned session %q", h.SessionID)
		}
		ev, err := event.Unmarshal(h.Raw)
		if err != nil || ev.Seq != h.Seq || !ev.TS.Equal(h.TS) {
			t.Errorf("Query() raw of seq %d decodes to %+v, %v", h.Seq, ev, err)
		}
	}
	if want := []string{"file.read", "net.connect", "pkg.install"}; !slices.Equal(kinds, want) {
		t.Errorf("Query(timeline B) kinds = %v, want %v", kinds, want)
	}
	if want := []uint64{1, 6, 11}; !slices.Equal(seqs, want) {
		t.Errorf("Query(timeline B) seqs = %v, want %v", seqs, want)
	}
	ss, err := ix.Sessions(ctx, mustParse(t, query.Args{Session: "B"}))
	if err != nil || len(ss) != 1 {
		t.Fatalf("Sessions(B) = %v, %v", ss, err)
	}
	s := ss[0]
	want := Session{ID: "B", First: t0.Add(2 * time.Second), Last: t0.Add(18 * time.Second), Events: 4, Files: 1, Nets: 1, Pkgs: 1,
		Ended: true, End: t0.Add(18 * time.Second), EndReason: "oom", ExitStatus: event.I32(137)}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Sessions(B) = %+v, want %+v", s, want)
	}
	// A rename is one event even though both of its paths match.
	hits, err = ix.Query(ctx, mustParse(t, query.Args{Path: "/**"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 5 {
		t.Errorf("Query(--path /**) = %d events, want 5 (one per file event)", len(hits))
	}
}

func TestIdempotentAdd(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	es := entries(t, handcrafted())
	if err := ix.Add(ctx, es[:10]); err != nil {
		t.Fatal(err)
	}
	before, _ := ix.Sessions(ctx, query.Filter{})
	// Re-adding overlapping batches, and the same batch twice, changes
	// nothing that was indexed already.
	for _, b := range [][]Entry{es[:10], es[5:], es, es[3:4]} {
		if err := ix.Add(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ix.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != uint64(len(es)) || st.Next != uint64(len(es)) {
		t.Errorf("Stats() = %+v, want %d events and next %d", st, len(es), len(es))
	}
	fresh := openTemp(t)
	if err := fresh.Add(ctx, es); err != nil {
		t.Fatal(err)
	}
	a, _ := ix.Sessions(ctx, query.Filter{})
	b, _ := fresh.Sessions(ctx, query.Filter{})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Sessions() after re-adds = %+v, want %+v", a, b)
	}
	if len(before) == len(a) && reflect.DeepEqual(before, a) {
		t.Errorf("Sessions() did not change after adding new entries")
	}
	if last, ok := ix.Last(); !ok || last != uint64(len(es)-1) {
		t.Errorf("Last() = %d, %v, want %d, true", last, ok, len(es)-1)
	}
}

func TestSkippedEntry(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	if _, ok := ix.Last(); ok {
		t.Errorf("Last() on an empty index ok = true, want false")
	}
	es := entries(t, handcrafted()[:3])
	es = append(es, Entry{Seq: 3, Raw: []byte(`{"not":"an event"`)})
	if err := ix.Add(ctx, es); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	sk, err := ix.Skipped(ctx)
	if err != nil || len(sk) != 1 || sk[3] == "" {
		t.Errorf("Skipped() = %v, %v, want seq 3 with a reason", sk, err)
	}
	if last, ok := ix.Last(); !ok || last != 3 {
		t.Errorf("Last() = %d, %v, want 3, true", last, ok)
	}
}

func TestSchemaMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	setSchemaVersion(t, path, 99)
	if _, err := Open(path); !errors.Is(err, ErrSchema) {
		t.Errorf("Open(version 99) error = %v, want ErrSchema", err)
	}
}

// oracle answers a filter by looking at every event, the slow and obvious
// way, with the matchers of package query.
type oracle struct {
	evs    []*event.Event
	reason map[string]string
	first  map[string]time.Time
}

func newOracle(evs []*event.Event) *oracle {
	o := &oracle{evs: evs, reason: map[string]string{}, first: map[string]time.Time{}}
	end := map[string]time.Time{}
	for _, ev := range evs {
		if f, ok := o.first[ev.SessionID]; !ok || ev.TS.Before(f) {
			o.first[ev.SessionID] = ev.TS
		}
		if ev.Kind == event.KindSessionTerminate && !ev.TS.Before(end[ev.SessionID]) {
			end[ev.SessionID], o.reason[ev.SessionID] = ev.TS, ev.Session.Reason
		}
	}
	return o
}

func (o *oracle) match(f *query.Filter, ev *event.Event) bool {
	switch {
	case f.Session != "" && ev.SessionID != f.Session,
		!f.Since.IsZero() && ev.TS.UnixNano() < f.Since.UnixNano(),
		!f.Until.IsZero() && ev.TS.UnixNano() >= f.Until.UnixNano(),
		!query.MatchKinds(f.Kinds, ev.Kind),
		f.Pid != 0 && (ev.Proc == nil || ev.Proc.Pid != f.Pid),
		f.Reason != "" && o.reason[ev.SessionID] != f.Reason:
		return false
	}
	if f.Path != nil && (ev.File == nil || !f.Path.Match(ev.File.Path) && !(ev.File.NewPath != "" && f.Path.Match(ev.File.NewPath))) {
		return false
	}
	if f.Domain != nil && (ev.Net == nil || !f.Domain.Match(ev.Net.Domain) && !(ev.Net.DNS != nil && f.Domain.Match(ev.Net.DNS.Query))) {
		return false
	}
	if p := f.Package; p != nil && (ev.Pkg == nil || ev.Pkg.Ecosystem != p.Ecosystem ||
		resolver.NormalizeName(p.Ecosystem, ev.Pkg.Name) != p.Name || !p.MatchVersion(ev.Pkg.Resolved)) {
		return false
	}
	return true
}

func (o *oracle) query(f query.Filter) []uint64 {
	var hits []*event.Event
	for _, ev := range o.evs {
		if o.match(&f, ev) {
			hits = append(hits, ev)
		}
	}
	slices.SortStableFunc(hits, func(a, b *event.Event) int { return a.TS.Compare(b.TS) })
	out := []uint64{}
	for _, ev := range hits {
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
		out = append(out, ev.Seq)
	}
	return out
}

func (o *oracle) sessions(f query.Filter) []string {
	set := map[string]bool{}
	for _, ev := range o.evs {
		if o.match(&f, ev) {
			set[ev.SessionID] = true
		}
	}
	out := []string{}
	for id := range set {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := o.first[a].Compare(o.first[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

func generate(t testing.TB, c indextest.Config) []*event.Event {
	var evs []*event.Event
	err := indextest.Generate(c, func(ev *event.Event) error {
		cp := *ev
		evs = append(evs, &cp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func checkAgainstOracle(t *testing.T, ix *Index, o *oracle) {
	t.Helper()
	ctx := context.Background()
	for _, a := range indextest.Questions {
		t.Run(fmt.Sprintf("%+v", a), func(t *testing.T) {
			f := mustParse(t, a)
			hits, err := ix.Query(ctx, f)
			if err != nil {
				t.Fatalf("Query(%+v) error = %v", a, err)
			}
			got := []uint64{}
			for _, h := range hits {
				got = append(got, h.Seq)
			}
			if want := o.query(f); !slices.Equal(got, want) {
				t.Errorf("Query(%+v) = %d events %v, want %d events %v", a, len(got), head(got), len(want), head(want))
			}
			ss, err := ix.Sessions(ctx, f)
			if err != nil {
				t.Fatalf("Sessions(%+v) error = %v", a, err)
			}
			if got, want := sessionIDs(ss), o.sessions(f); !slices.Equal(got, want) {
				t.Errorf("Sessions(%+v) = %v, want %v", a, head(got), head(want))
			}
		})
	}
}

func head[T any](s []T) []T {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// TestGeneratedAgainstOracle checks every filter on a mixed record against
// a full scan.
func TestGeneratedAgainstOracle(t *testing.T) {
	evs := generate(t, indextest.Config{Sessions: 400, PerSession: 60, Seed: 1, Suspect: 10})
	ix := openTemp(t)
	es := entries(t, evs)
	for i := 0; i < len(es); i += 1000 {
		if err := ix.Add(context.Background(), es[i:min(i+1000, len(es))]); err != nil {
			t.Fatal(err)
		}
	}
	o := newOracle(evs)
	// The data must exercise the questions: look-alikes present, rare ones
	// rare but there.
	for _, a := range []query.Args{{Path: "/etc/sshd"}, {Path: "/etc/ssh"}, {Path: "/home/agent/.ssh"}, {Domain: "badexample.com"},
		{Domain: "*.example.com"}, {Domain: "*.evil.example"}, {Package: "npm:lodash@4.17.19"}, {Package: "npm:lodash@4.17.21"},
		{Package: "npm:lodash@4.17.20"}, {Reason: "oom"}} {
		if n := len(o.sessions(mustParse(t, a))); n == 0 || n == 400 {
			t.Fatalf("generated data: %+v matches %d of 400 sessions, want some but not all", a, n)
		}
	}
	checkAgainstOracle(t, ix, o)
}

// TestReindexMatchesIncremental writes a record into a real journal, follows
// it with one index while it grows, rebuilds another from scratch, and
// checks that both give the oracle's answers and the same summaries.
func TestReindexMatchesIncremental(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := generate(t, indextest.Config{Sessions: 150, PerSession: 40, Seed: 2, Suspect: 10})
	j, dir := journaltest.Open(t, journal.WithSegmentSize(256<<10))
	live := openTemp(t, WithBatchSize(97))
	done := make(chan error, 1)
	go func() { done <- live.Follow(ctx, dir, j) }()
	for i := 0; i < len(evs); i += 500 {
		chunk := evs[i:min(i+500, len(evs))]
		cp := make([]*event.Event, len(chunk))
		for k, ev := range chunk {
			c := *ev
			c.Seq = 0
			cp[k] = &c
		}
		if err := j.Append(ctx, cp...); err != nil {
			t.Fatalf("Append() error = %v", err)
		}
	}
	// Wait for the follower to reach the journal's end; the deadline only
	// bounds a hang, the test does not depend on speed.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if last, ok := live.Last(); ok && last+1 >= j.Size() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Follow did not reach seq %d", j.Size()-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow() = %v, want context.Canceled", err)
	}
	// The journal may hold its own events besides ours; the oracle reads
	// back exactly what the journal holds.
	var all []*event.Event
	if err := journal.Scan(dir, 0, func(seq uint64, raw []byte) error {
		ev, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		all = append(all, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rebuilt.db")
	var calls int
	var lastDone uint64
	if err := Reindex(context.Background(), path, dir, func(done, total uint64) { calls++; lastDone = done }, WithBatchSize(1000)); err != nil {
		t.Fatalf("Reindex() error = %v", err)
	}
	if calls == 0 || lastDone != uint64(len(all)) {
		t.Errorf("Reindex progress: %d calls, last done %d, want some and %d", calls, lastDone, len(all))
	}
	rebuilt, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	o := newOracle(all)
	t.Run("live", func(t *testing.T) { checkAgainstOracle(t, live, o) })
	t.Run("rebuilt", func(t *testing.T) { checkAgainstOracle(t, rebuilt, o) })
	a, err1 := live.Sessions(context.Background(), query.Filter{})
	b, err2 := rebuilt.Sessions(context.Background(), query.Filter{})
	if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) || len(a) != 150 {
		t.Errorf("Sessions(): live %d (%v), rebuilt %d (%v); want the same 150", len(a), err1, len(b), err2)
	}
	// Reindexing again over an existing file replaces it.
	if err := Reindex(context.Background(), path, dir, nil); err != nil {
		t.Fatalf("second Reindex() error = %v", err)
	}
}

func TestNoJournal(t *testing.T) {
	ix := openTemp(t)
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := ix.CatchUp(context.Background(), missing); !errors.Is(err, ErrNoJournal) {
		t.Errorf("CatchUp(missing) error = %v, want ErrNoJournal", err)
	}
	if err := Reindex(context.Background(), filepath.Join(t.TempDir(), "x.db"), missing, nil); !errors.Is(err, ErrNoJournal) {
		t.Errorf("Reindex(missing) error = %v, want ErrNoJournal", err)
	}
}

// TestQueryPlans asserts with EXPLAIN QUERY PLAN that each of the five
// questions is answered through an index and never scans a large table.
func TestQueryPlans(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	evs := generate(t, indextest.Config{Sessions: 50, PerSession: 40, Seed: 3, Suspect: 30})
	if err := ix.Add(ctx, entries(t, evs)); err != nil {
		t.Fatal(err)
	}
	if err := ix.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	sess := indextest.SessionID(4)
	questions := []struct {
		name     string
		args     query.Args
		sessions bool
		want     string // an index the plan must use
	}{
		{"1 path prefix", query.Args{Path: "/home/agent/.ssh"}, true, "SEARCH r USING PRIMARY KEY (path_id=?)"},
		{"1 path prefix since", query.Args{Path: "/home/agent/.ssh", Since: "2026-11-01T00:00:01Z"}, true, "files_path"},
		{"1 path glob", query.Args{Path: "/home/*/.ssh/id_*"}, true, "SEARCH r USING PRIMARY KEY (path_id=?)"},
		{"1 path events", query.Args{Path: "/home/agent/.ssh"}, false, "files_path"},
		{"2 domain suffix", query.Args{Domain: "*.evil.example"}, true, "SEARCH r USING PRIMARY KEY (domain_id=?)"},
		{"2 domain suffix kind", query.Args{Domain: "*.evil.example", Kind: "net.dns"}, true, "nets_domain"},
		{"2 domain exact", query.Args{Domain: "example.com"}, true, "SEARCH r USING PRIMARY KEY (domain_id=?)"},
		{"2 domain events", query.Args{Domain: "example.com"}, false, "nets_domain"},
		{"3 package exact", query.Args{Package: "npm:lodash@4.17.20"}, true, "SEARCH r USING PRIMARY KEY (pkg_id=?)"},
		{"3 package in session", query.Args{Package: "npm:lodash@4.17.20", Session: sess}, true, "pkgs_pkg"},
		{"3 package range", query.Args{Package: "npm:lodash@^4.17.0"}, true, "SEARCH r USING PRIMARY KEY (pkg_id=?)"},
		{"3 package range events", query.Args{Package: "npm:lodash@^4.17.0"}, false, "pkgs_pkg"},
		{"4 reason", query.Args{Reason: "oom"}, true, "sessions_reason"},
		{"sessions by kind", query.Args{Kind: "alert", Since: "2026-11-01T00:00:01Z"}, true, "COVERING INDEX events_kind"},
		{"events by kind", query.Args{Kind: "alert", Since: "2026-11-01T00:00:01Z"}, false, "events_kind"},
		{"sessions by time", query.Args{Since: "2026-11-01T00:00:01Z", Until: "2026-11-01T00:00:02Z"}, true, "events_sid_ts"},
		{"5 timeline", query.Args{Session: sess, Since: "2026-11-01T00:00:01Z", Until: "2026-11-01T00:00:09Z"}, false, "events_sid_ts"},
	}
	for _, q := range questions {
		t.Run(q.name, func(t *testing.T) {
			f := mustParse(t, q.args)
			var p *plan
			var err error
			if q.sessions {
				p, err = ix.sessionPlan(ctx, &f)
			} else {
				p, err = ix.eventPlan(ctx, &f)
			}
			if err != nil || p.none {
				t.Fatalf("plan(%+v) = %+v, %v", q.args, p, err)
			}
			lines, err := explain(ctx, ix.db, p.q, p.args...)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", p.q, err)
			}
			plan := strings.Join(lines, "\n")
			t.Logf("%s\n%s", p.q, plan)
			if !strings.Contains(plan, q.want) {
				t.Errorf("plan of %+v does not use %s:\n%s", q.args, q.want, plan)
			}
			for _, l := range lines {
				for _, big := range []string{"events", "files", "nets", "pkgs", "e", "x", "r", "path_sessions", "domain_sessions", "pkg_sessions"} {
					if strings.HasPrefix(strings.TrimSpace(l), "SCAN "+big+" ") || strings.TrimSpace(l) == "SCAN "+big {
						t.Errorf("plan of %+v scans %s: %s\n%s", q.args, big, l, plan)
					}
				}
			}
		})
	}
}

func explain(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		out = append(out, detail)
	}
	return out, rows.Err()
}

// TestStale checks that an index refuses to continue from a journal that
// does not hold what it indexed.
func TestStale(t *testing.T) {
	ctx := context.Background()
	appendAll := func(j *journal.Journal, evs []*event.Event) {
		for _, ev := range evs {
			c := *ev
			if err := j.Append(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}
	}
	j1, dir1 := journaltest.Open(t, journal.WithSegmentSize(256<<10))
	appendAll(j1, handcrafted()[:8])
	ix := openTemp(t)
	if n, err := ix.CatchUp(ctx, dir1); err != nil || n != j1.Size() {
		t.Fatalf("CatchUp() = %d, %v, want %d, nil", n, err, j1.Size())
	}
	// Current: nothing to do, no error.
	if n, err := ix.CatchUp(ctx, dir1); err != nil || n != 0 {
		t.Errorf("CatchUp(current) = %d, %v, want 0, nil", n, err)
	}
	// Another journal of the same length but other entries.
	j2, dir2 := journaltest.Open(t, journal.WithSegmentSize(256<<10))
	evs := handcrafted()[:8]
	for _, ev := range evs {
		ev.SessionID += "x"
	}
	appendAll(j2, evs)
	if _, err := ix.CatchUp(ctx, dir2); !errors.Is(err, ErrStale) {
		t.Errorf("CatchUp(other journal) error = %v, want ErrStale", err)
	}
	// A shorter journal.
	j3, dir3 := journaltest.Open(t, journal.WithSegmentSize(256<<10))
	appendAll(j3, handcrafted()[:3])
	if _, err := ix.CatchUp(ctx, dir3); !errors.Is(err, ErrStale) {
		t.Errorf("CatchUp(shorter journal) error = %v, want ErrStale", err)
	}
}

// TestConcurrentCatchUp opens one index file twice, as the daemon and a
// query would, and catches both up with the same journal at once: no event
// may be counted twice in the session summaries.
func TestConcurrentCatchUp(t *testing.T) {
	ctx := context.Background()
	j, dir := journaltest.Open(t, journal.WithSegmentSize(256<<10))
	evs := generate(t, indextest.Config{Sessions: 40, PerSession: 50, Seed: 5})
	for _, ev := range evs {
		ev.Seq = 0
	}
	if err := j.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "index.db")
	var ixs []*Index
	for range 2 {
		ix, err := Open(path, WithBatchSize(64))
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		ixs = append(ixs, ix)
	}
	errs := make(chan error, len(ixs))
	for _, ix := range ixs {
		go func() {
			_, err := ix.CatchUp(ctx, dir)
			errs <- err
		}()
	}
	for range ixs {
		if err := <-errs; err != nil {
			t.Fatalf("CatchUp() error = %v", err)
		}
	}
	fresh := openTemp(t)
	if _, err := fresh.CatchUp(ctx, dir); err != nil {
		t.Fatal(err)
	}
	want, _ := fresh.Sessions(ctx, query.Filter{})
	for i, ix := range ixs {
		got, err := ix.Sessions(ctx, query.Filter{})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("index %d: Sessions() = %d sessions (%v), want the %d of a single catch-up", i, len(got), err, len(want))
		}
	}
	st, _ := ixs[0].Stats(ctx)
	if st.Events != j.Size() {
		t.Errorf("Stats().Events = %d, want %d", st.Events, j.Size())
	}
}

// TestSessionLost: a session's summary sums the counts of its own loss
// events; a host-wide loss (no session) is nobody's.
func TestSessionLost(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	loss := func(sess string, n uint64, at int) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(at) * time.Second), SessionID: sess,
			Kind: event.KindLoss, Source: event.SourceKernel,
			Loss: &event.Loss{Count: n, Source: "kernel:ringbuf", LostKind: event.KindExec, HostWide: sess == ""}}
	}
	evs := []*event.Event{loss("L", 17, 1), loss("", 1000, 2), loss("L", 5, 3), loss("M", 2, 4)}
	if err := ix.Add(ctx, entries(t, evs)); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	for id, want := range map[string]uint64{"L": 22, "M": 2} {
		ss, err := ix.Sessions(ctx, mustParse(t, query.Args{Session: id}))
		if err != nil || len(ss) != 1 {
			t.Fatalf("Sessions(%s) = %v, %v", id, ss, err)
		}
		if ss[0].Lost != want {
			t.Errorf("Sessions(%s).Lost = %d, want %d", id, ss[0].Lost, want)
		}
	}
}

// TestSessionsWithoutHostEvents: the host's own events (collector.capabilities,
// which each daemon or run start writes first, journal.recovered, a host-wide
// collector.loss) have no session, so they make no row in Sessions under any
// filter, while Query still returns them.
func TestSessionsWithoutHostEvents(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	host := func(i int, kind string, mod func(*event.Event)) *event.Event {
		ev := &event.Event{V: event.SchemaVersion, TS: at(i), Kind: kind, Source: event.SourceKernel}
		mod(ev)
		return ev
	}
	read := func(i int, sess string) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: at(i), SessionID: sess, Kind: event.KindFileRead,
			Source: event.SourceKernel, File: &event.File{Op: "read", Path: "/etc/hosts"}, Proc: &event.Proc{Pid: 7}}
	}
	evs := []*event.Event{
		host(1, event.KindCapabilities, func(e *event.Event) { e.Kernel = &event.Kernel{Release: "6.18.0"} }),
		host(2, event.KindJournalRecovered, func(e *event.Event) {
			e.Source = event.SourceJournal
			e.Journal = &event.Journal{Segment: "0000", CutBytes: 12}
		}),
		read(3, "A"),
		host(4, event.KindLoss, func(e *event.Event) {
			e.Loss = &event.Loss{Count: 3, Source: "kernel:ringbuf", LostKind: event.KindExec, HostWide: true}
		}),
		read(5, "B"),
	}
	if err := ix.Add(ctx, entries(t, evs)); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	tests := []struct {
		name string
		args query.Args
		want []string
	}{
		{"all", query.Args{}, []string{"A", "B"}},
		{"limit", query.Args{Limit: "1"}, []string{"A"}},
		{"host kinds only", query.Args{Kind: "collector.,journal."}, []string{}},
		{"window of host events only", query.Args{Since: at(1).Format(time.RFC3339), Until: at(3).Format(time.RFC3339)}, []string{}},
		{"path", query.Args{Path: "/etc/hosts"}, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss, err := ix.Sessions(ctx, mustParse(t, tt.args))
			if err != nil {
				t.Fatalf("Sessions(%+v) error = %v", tt.args, err)
			}
			if got := sessionIDs(ss); !slices.Equal(got, tt.want) {
				t.Errorf("Sessions(%+v) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
	hits, err := ix.Query(ctx, query.Filter{})
	if err != nil || len(hits) != len(evs) {
		t.Errorf("Query() = %d events, %v; want all %d, the host's among them", len(hits), err, len(evs))
	}
	if st, err := ix.Stats(ctx); err != nil || st.Sessions != 2 {
		t.Errorf("Stats() = %+v, %v; want 2 sessions", st, err)
	}
}

// TestPackageOnlyByPurl: an event that names its package by purl alone is
// indexed under the purl's ecosystem, name (an npm scope joined to it) and
// version, as resolver.FromPurl reads them.
func TestPackageOnlyByPurl(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	evs := []*event.Event{
		{V: event.SchemaVersion, TS: t0, SessionID: "P", Kind: event.KindPkgInstall, Source: event.SourceShim,
			Pkg: &event.Pkg{Purl: "pkg:npm/%40babel/core@7.26.0"}},
		{V: event.SchemaVersion, TS: t0, SessionID: "Q", Kind: event.KindPkgInstall, Source: event.SourceShim,
			Pkg: &event.Pkg{Purl: "pkg:pypi/org/requests@2.0"}},
	}
	if err := ix.Add(ctx, entries(t, evs)); err != nil {
		t.Fatalf("Add() error = %v", err)
	}
	for pkg, want := range map[string][]string{
		"npm:@babel/core@7.26.0": {"P"},
		"npm:@babel/core@7.25.0": {},
		"pypi:requests":          {},
	} {
		got, err := ix.Sessions(ctx, mustParse(t, query.Args{Package: pkg}))
		if err != nil {
			t.Fatalf("Sessions(%s) error = %v", pkg, err)
		}
		if ids := sessionIDs(got); !slices.Equal(ids, want) {
			t.Errorf("Sessions(--package %s) = %v, want %v", pkg, ids, want)
		}
	}
}
