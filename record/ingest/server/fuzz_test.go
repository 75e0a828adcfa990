package server

import (
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// FuzzHandle feeds arbitrary request payloads from a real peer (this
// process, over a socketpair) to the server, which appends to a real
// journal. Whatever the bytes, it must answer with either a batch-level
// code or exactly one result per event.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"v":1,"events":[{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"tool.invoke","tool":{"name":"x"}}]}`))
	f.Add([]byte(`{"v":1,"events":[{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"pkg.install","pkg":{"ecosystem":"npm","name":"x"}},{"event_id":"a b"}]}`))
	f.Add([]byte(`{"v":1,"events":[{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"model.io","event_id":"d","model":{}},{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"s","kind":"model.io","event_id":"d","model":{}}]}`))
	f.Add([]byte("\x00garbage"))
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		f.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer b.Close()
	fc, err := net.FileConn(a)
	a.Close()
	if err != nil {
		f.Fatal(err)
	}
	defer fc.Close()
	j, _ := journaltest.Open(f)
	srv := New(j, NewTable())
	ap, err := srv.attr.Open(fc.(*net.UnixConn))
	if err != nil {
		f.Skipf("no peer credentials: %v", err)
	}
	defer ap.Close()
	p := &peer{Peer: ap}
	f.Fuzz(func(t *testing.T, payload []byte) {
		rep := srv.handle(p, payload)
		if rep.Code != "" {
			return
		}
		batch, err := ingest.DecodeBatch(payload)
		if err != nil {
			t.Fatalf("handle accepted a payload DecodeBatch refuses: %v", err)
		}
		if len(rep.Results) != batch.Len() {
			t.Fatalf("handle gave %d results for %d events", len(rep.Results), batch.Len())
		}
		for i, r := range rep.Results {
			switch r.Status {
			case ingest.StatusOK, ingest.StatusDuplicate, ingest.StatusRejected, ingest.StatusFailed:
			default:
				t.Fatalf("result %d has status %q", i, r.Status)
			}
		}
	})
}
