package server

import (
	"context"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// blockGit blocks every check whose source is a git URL.
type blockGit struct{ sessions []string }

func (b *blockGit) Check(_ context.Context, session string, cs []ingest.Check) []ingest.Verdict {
	b.sessions = append(b.sessions, session)
	out := make([]ingest.Verdict, len(cs))
	for i, c := range cs {
		out[i] = ingest.Verdict{Verdict: "allow", Reason: "fine"}
		if strings.HasPrefix(c.Source, "git+") {
			out[i] = ingest.Verdict{Verdict: "block", Rule: "on_unknown_source", Reason: "unknown source: git host example.invalid is not approved"}
		}
	}
	return out
}

// TestCheck: a check request is answered verdict by verdict, and each block
// is in the journal as a pkg.blocked of the peer before the reply; a server
// without a checker answers unavailable, and the client says so.
func TestCheck(t *testing.T) {
	needRoot(t)
	j, jdir := journaltest.Open(t)
	ck := &blockGit{}
	sock := startServer(t, New(j, NewTable(), WithChecker(ck)))
	c, err := ingest.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checks := []ingest.Check{
		{Manager: "npm", Ecosystem: "npm", Name: "left-pad", Spec: "^1.3.0"},
		{Manager: "npm", Ecosystem: "npm", Spec: "git+https://example.invalid/x.git", Source: "git+https://example.invalid/x.git"},
	}
	vs, err := c.Check(context.Background(), checks)
	if err != nil {
		t.Fatalf("Check = %v", err)
	}
	if len(vs) != 2 || vs[0].Verdict != "allow" || vs[1].Verdict != "block" || vs[1].Rule != "on_unknown_source" {
		t.Fatalf("Check = %+v, want allow, block by on_unknown_source", vs)
	}
	evs := journaled(t, jdir)
	if len(evs) != 1 {
		t.Fatalf("journal holds %d events, want the one pkg.blocked", len(evs))
	}
	e := evs[0]
	if e.Kind != event.KindPkgBlocked || e.Source != event.SourceAPI || e.Pkg.Manager != "npm" ||
		e.Pkg.SourceURL != "git+https://example.invalid/x.git" || e.Pkg.Verdict != "block" || e.Pkg.Rule != "on_unknown_source" ||
		e.Proc == nil || e.Proc.UID == nil || *e.Proc.UID != 0 {
		t.Errorf("journaled %+v %+v, want a pkg.blocked of root (api: outside every session) with the rule", e, e.Pkg)
	}

	// Events and checks do not mix, and an empty check list is malformed.
	for _, bad := range []string{`{"v":1,"checks":[]}`, `{"v":1,"checks":[{"manager":"npm","ecosystem":"npm"}],"events":[{}]}`,
		`{"v":1,"checks":[{"manager":"npm","ecosystem":"npm","evil":1}]}`} {
		if rep := roundTrip(t, sock, []byte(bad)); rep.Code != ingest.CodeMalformed {
			t.Errorf("%s: reply %+v, want malformed", bad, rep)
		}
	}

	sock2 := startServer(t, New(j, NewTable()))
	c2, err := ingest.Dial(sock2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Check(context.Background(), checks); err == nil || !strings.Contains(err.Error(), "no policy") {
		t.Errorf("Check without a checker = %v, want an error naming the missing policy", err)
	}
}
