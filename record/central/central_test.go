package central_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/query"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dsn string, opts ...central.Option) *central.Store {
	t.Helper()
	s, err := central.Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// generated is a stream of indextest's as the journal of one host holds
// it: entry i is event i with seq i.
func generated(t *testing.T, c indextest.Config) []central.Entry {
	t.Helper()
	var out []central.Entry
	err := indextest.Generate(c, func(ev *event.Event) error {
		ev.Seq, ev.Host = uint64(len(out)), "h1"
		raw, err := event.Marshal(ev)
		if err != nil {
			return err
		}
		out = append(out, central.Entry{Host: "h1", Seq: ev.Seq, Raw: raw})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t *testing.T, s *central.Store, es []central.Entry, batch int) central.Result {
	t.Helper()
	var sum central.Result
	for i := 0; i < len(es); i += batch {
		r, err := s.Write(context.Background(), es[i:min(i+batch, len(es))])
		if err != nil {
			t.Fatalf("Write() error = %v", err)
		}
		sum.Added += r.Added
		sum.Duplicates += r.Duplicates
		sum.Skipped += r.Skipped
	}
	return sum
}

// TestSameAnswersAsTheIndex writes one host's generated record into the
// SQLite index and into the central store, and asks both every question of
// indextest.Questions: the events (seq, time, session, kind, source and
// bytes) and the sessions (every summary field) must be the same.
func TestSameAnswersAsTheIndex(t *testing.T) {
	es := generated(t, indextest.Config{Sessions: 300, PerSession: 50, Seed: 1, Suspect: 10})
	ix, err := index.Open(t.TempDir() + "/index.db")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ies []index.Entry
	for _, e := range es {
		ies = append(ies, index.Entry{Seq: e.Seq, Raw: e.Raw})
	}
	for i := 0; i < len(ies); i += 1000 {
		if err := ix.Add(context.Background(), ies[i:min(i+1000, len(ies))]); err != nil {
			t.Fatal(err)
		}
	}
	s := openStore(t, newDatabase(t))
	if r := write(t, s, es, 700); r.Added != len(es) || r.Duplicates != 0 {
		t.Fatalf("first write: %+v, want %d added", r, len(es))
	}
	// Everything again, in other batches: nothing is added twice.
	if r := write(t, s, es, 1100); r.Added != 0 || r.Duplicates != len(es) {
		t.Fatalf("second write: %+v, want %d duplicates", r, len(es))
	}
	compareStores(t, &ix.Reader, s.Reader)
}

func compareStores(t *testing.T, want, got *index.Reader) {
	t.Helper()
	ctx := context.Background()
	for _, a := range indextest.Questions {
		f, err := query.Parse(a, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		wh, err := want.Query(ctx, f)
		if err != nil {
			t.Fatalf("index Query(%+v): %v", a, err)
		}
		gh, err := got.Query(ctx, f)
		if err != nil {
			t.Fatalf("central Query(%+v): %v", a, err)
		}
		if len(wh) == 0 && len(a.Reason) == 0 && a.Kind != "alert" {
			t.Logf("%+v matches nothing", a)
		}
		if !slices.EqualFunc(wh, gh, func(a, b index.Hit) bool {
			return a.Seq == b.Seq && a.TS.Equal(b.TS) && a.SessionID == b.SessionID && a.Kind == b.Kind &&
				a.Source == b.Source && string(a.Raw) == string(b.Raw)
		}) {
			t.Errorf("Query(%+v): central gives %d events %v, the index %d %v", a, len(gh), seqs(gh), len(wh), seqs(wh))
		}
		ws, err := want.Sessions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		gs, err := got.Sessions(ctx, f)
		if err != nil {
			t.Fatalf("central Sessions(%+v): %v", a, err)
		}
		if w, g := sessionLines(ws), sessionLines(gs); !slices.Equal(w, g) {
			t.Errorf("Sessions(%+v): central gives %d sessions, the index %d\ncentral %q\nindex   %q", a, len(g), len(w), head(g), head(w))
		}
	}
}

func seqs(hs []index.Hit) []uint64 {
	out := []uint64{}
	for i, h := range hs {
		if i == 10 {
			break
		}
		out = append(out, h.Seq)
	}
	return out
}

// sessionLines are the sessions' every field, one line each.
func sessionLines(ss []index.Session) []string {
	out := []string{}
	for _, s := range ss {
		exit := "-"
		if s.ExitStatus != nil {
			exit = fmt.Sprint(*s.ExitStatus)
		}
		out = append(out, fmt.Sprintf("%s %s %s %d/%d/%d/%d/%d/%d lost %d ended %v %s %q exit %s", s.ID, s.First.Format(time.RFC3339Nano),
			s.Last.Format(time.RFC3339Nano), s.Events, s.Procs, s.Files, s.Nets, s.Pkgs, s.Alerts, s.Lost, s.Ended,
			s.End.Format(time.RFC3339Nano), s.EndReason, exit))
	}
	return out
}

func head[T any](s []T) []T {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}
