package central_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
)

// randomText is n bytes of letters that do not compress, as a hostile
// agent would make a path or a name that no btree key holds.
func randomText(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[r.IntN(62)]
	}
	return string(b)
}

// TestHostileEntries writes what a host's stream may carry that no honest
// sink sends: bytes that are not JSON or not UTF-8, strings with NUL,
// and values too long for a btree key in every indexed column. Each write
// succeeds (nothing holds the stream up), each event is kept, and a path
// too long for the index is still found by the questions, exactly and by
// a glob on its end, as the SQLite index finds it.
func TestHostileEntries(t *testing.T) {
	if !strings.Contains(mustRead(t, "migrations/0001_tables.sql"), fmt.Sprintf("left(path, %d)", index.PathKey)) {
		t.Fatalf("the migration's path_key is not left(path, index.PathKey=%d)", index.PathKey)
	}
	r := rand.New(rand.NewPCG(1, 2))
	long := "/tmp/" + randomText(r, 3000) + "/.ssh/id_rsa"
	huge := randomText(r, 5000)
	ev := func(mod func(*event.Event)) []byte {
		e := &event.Event{V: event.SchemaVersion, TS: t0, SessionID: "s1", Kind: event.KindFileRead, Source: event.SourceKernel,
			Proc: &event.Proc{Pid: 1, Exe: "/bin/cat"}, File: &event.File{Path: "/etc/hosts"}}
		mod(e)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raws := [][]byte{
		[]byte("{"), []byte("not json at all"), []byte("{\"kind\":\"file.read\",\"ts\":\"2026-11-01T00:00:00Z\",\"x\":\"\xff\xfe\"}"),
		ev(func(e *event.Event) { e.File.Path = long }),
		ev(func(e *event.Event) { e.File.Path = "/tmp/a\u0000b" }),
		ev(func(e *event.Event) { e.Kind = huge; e.File = nil }),
		ev(func(e *event.Event) { e.Source = event.Source(huge) }),
		ev(func(e *event.Event) { e.Proc.Exe = huge }),
		ev(func(e *event.Event) { e.SessionID = huge }),
		ev(func(e *event.Event) {
			e.Kind, e.File = event.KindNetConnect, nil
			e.Net = &event.Net{DstIP: huge, DstPort: 443, Domain: huge[:3000] + ".example"}
		}),
		ev(func(e *event.Event) {
			e.Kind, e.File = event.KindPkgInstall, nil
			e.Pkg = &event.Pkg{Ecosystem: "npm" + huge, Name: huge, Resolved: huge, Purl: "pkg:npm/" + huge}
		}),
	}
	var es []central.Entry
	for i, raw := range raws {
		es = append(es, central.Entry{Host: "h1", Seq: uint64(i), Raw: raw})
	}
	s := openStore(t, newDatabase(t))
	res, err := s.Write(context.Background(), es)
	if err != nil {
		t.Fatalf("Write of hostile entries: %v", err)
	}
	if res.Added != len(raws) || res.Skipped != 3 {
		t.Fatalf("Write = %+v, want %d added, the 3 that are not events skipped", res, len(raws))
	}
	ctx := context.Background()
	for _, a := range []query.Args{{Path: long}, {Path: "/tmp/**/.ssh/id_rsa"}, {Path: strings.TrimSuffix(long, "/.ssh/id_rsa")}} {
		f, err := query.Parse(a, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		hits, err := s.Query(ctx, f)
		if err != nil || len(hits) != 1 || hits[0].Seq != 3 {
			t.Errorf("Query(path %.40q…) = %d hits, %v; want entry 3", a.Path, len(hits), err)
		}
	}
	all, err := s.Query(ctx, query.Filter{})
	if err != nil || len(all) != len(raws)-3 {
		t.Errorf("Query() = %d events, %v; want %d", len(all), err, len(raws)-3)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
