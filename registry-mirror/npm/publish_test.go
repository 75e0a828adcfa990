package npm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// TestPublishRefusalRecorded: the mirror's refusal of a request that
// would change the registry (its router refuses every method but GET and
// HEAD, and hands the error to the handler's WriteError) is recorded, with
// the package and the client's process; a refused GET, and a refusal for
// another reason, is not a publish.
func TestPublishRefusalRecorded(t *testing.T) {
	if RulePublish != pkgview.PublishRefusedRule {
		t.Fatalf("RulePublish = %q, pkgview reads %q", RulePublish, pkgview.PublishRefusedRule)
	}
	m := newMirror(t, npmtest.Start(t, fixture()...), "")
	methodErr := fetch.Errorf(http.StatusMethodNotAllowed, "method", nil, "the mirror serves GET and HEAD only")
	tests := []struct {
		name, method, path string
		err                error
		want               string // the recorded name, "-" for no record
	}{
		{"npm publish", http.MethodPut, "/npm/left-pad", methodErr, "left-pad"},
		{"scoped publish", http.MethodPut, "/npm/@scope%2futil", methodErr, "@scope/util"},
		{"unpublish", http.MethodDelete, "/npm/left-pad/-rev/3-abc", methodErr, "left-pad"},
		{"dist-tag", http.MethodPut, "/npm/-/package/left-pad/dist-tags/latest", methodErr, "left-pad"},
		{"a bad name", http.MethodPost, "/npm/..%2fx", methodErr, ""},
		{"a GET refused", http.MethodGet, "/npm/left-pad", fetch.Errorf(http.StatusNotFound, "not_found", nil, "no"), "-"},
		{"another refusal of a PUT", http.MethodPut, "/npm/left-pad", fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "no"), "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(m.Records())
			proc := &event.Proc{Pid: 4242, Comm: "node"}
			ctx := fetch.WithClient(context.Background(), fetch.Client{Addr: netip.MustParseAddrPort("127.0.0.1:40000"), SessionID: "s", Proc: proc})
			r := httptest.NewRequestWithContext(ctx, tt.method, tt.path, nil)
			w := httptest.NewRecorder()
			if e := m.h.WriteError(w, r, tt.err); w.Code != e.Status {
				t.Errorf("WriteError: status %d, returned %d", w.Code, e.Status)
			}
			recs := m.Records()[before:]
			if tt.want == "-" {
				if len(recs) != 0 {
					t.Errorf("recorded %+v, want nothing", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			rec := recs[0]
			if rec.Name != tt.want || rec.Outcome != fetch.Blocked || rec.Rule != RulePublish || rec.Client.Proc == nil ||
				rec.Client.Proc.Pid != 4242 || rec.Client.SessionID != "s" {
				t.Errorf("record = name %q outcome %q rule %q client %+v, want %q blocked %s by pid 4242 of s",
					rec.Name, rec.Outcome, rec.Rule, rec.Client, tt.want, RulePublish)
			}
		})
	}
}

// FuzzPublishedName: any request path gives a valid package name or none.
func FuzzPublishedName(f *testing.F) {
	for _, s := range []string{"left-pad", "@scope%2futil", "left-pad/-rev/3-abc", "-/package/x/dist-tags/latest", "..%2fx", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if n := publishedName(p); n != "" && CheckName(n) != nil {
			t.Errorf("publishedName(%q) = %q, not a valid name", p, n)
		}
	})
}
