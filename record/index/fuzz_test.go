package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sandtrail/sandtrail/record/query"
)

// FuzzAdd feeds arbitrary bytes to Add as journal entries, the way a
// damaged or hostile journal would. Add must never fail on content: an
// entry is either indexed or recorded as skipped, and the cursor moves
// past it. Searching afterwards must work.
func FuzzAdd(f *testing.F) {
	f.Add([]byte(`{"v":1,"seq":0,"ts":"2026-11-29T08:00:00Z","session_id":"s","kind":"file.read","source":"kernel","file":{"op":"read","path":"/etc/ssh/x"}}`))
	f.Add([]byte(`{"v":1,"ts":"2026-11-29T08:00:00Z","session_id":"s","kind":"net.dns","source":"kernel","net":{"op":"dns","dns":{"query":"A.Example.COM.","qtype":"A"}}}`))
	f.Add([]byte(`{"v":1,"ts":"2026-11-29T08:00:00Z","session_id":"s","kind":"pkg.install","source":"shim","pkg":{"ecosystem":"","name":"","purl":"pkg:npm/%40a/b@1.0.0"}}`))
	f.Add([]byte(`{"v":1,"ts":"2026-11-29T08:00:00Z","kind":"session.terminate","source":"session","session":{"op":"terminate","reason":"oom","exit_status":137}}`))
	f.Add([]byte(`{"kind":"x"}`))
	f.Add([]byte(`not json`))
	ix, err := Open(filepath.Join(f.TempDir(), "index.db"))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	var seq uint64
	f.Fuzz(func(t *testing.T, raw []byte) {
		seq++
		if err := ix.Add(ctx, []Entry{{Seq: seq, Raw: raw}}); err != nil {
			t.Fatalf("Add(%q) error = %v", raw, err)
		}
		if last, ok := ix.Last(); !ok || last != seq {
			t.Fatalf("Last() = %d, %v after adding seq %d", last, ok, seq)
		}
		if _, err := ix.Sessions(ctx, mustFilter(t)); err != nil {
			t.Fatalf("Sessions() error = %v", err)
		}
	})
}

func mustFilter(t *testing.T) query.Filter {
	f, err := query.Parse(query.Args{Path: "/etc/**"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
