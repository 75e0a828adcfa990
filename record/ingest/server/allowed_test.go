package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
)

// TestHostAuthoredKindsRefused: of every kind in event.Kinds (and a few it
// does not know), a process in a session may send only pkg.install,
// pkg.blocked, tool.invoke and model.io, and root outside every session
// those and the mirror's pkg.fetch and pkg.filter; every other kind, the
// ones the host's own parts write (process.*, file.*, net.*, session.*,
// limit.*, collector.*, alert, and from a session pkg.fetch and
// pkg.filter), is refused before anything of the event is kept, with a
// message that says who may send what.
func TestHostAuthoredKindsRefused(t *testing.T) {
	s := &Server{host: "test-host"}
	agent := []string{event.KindPkgInstall, event.KindPkgBlocked, event.KindToolInvoke, event.KindModelIO}
	peers := []struct {
		name    string
		a       sender
		may     []string
		message string
	}{
		{"session peer", sender{pid: 42, uid: 1000, cgroupID: 7, session: "s-1"}, agent,
			"may not be sent by a process in a session"},
		{"root outside a session", sender{pid: 43, uid: 0}, append(agent, event.KindPkgFetch, event.KindPkgFilter),
			"may not be sent by root outside every session"},
	}
	now := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	kinds := append([]string{"tool.result", "pkg.verify", "net.forged", "", "alert.x"}, event.Kinds...)
	for _, p := range peers {
		for _, kind := range kinds {
			t.Run(p.name+"/"+kind, func(t *testing.T) {
				e := &event.Event{V: event.SchemaVersion, TS: now, SessionID: "s-1", Kind: kind, Source: event.SourceKernel,
					Proc: &event.Proc{Pid: 1}, Pkg: &event.Pkg{Ecosystem: "npm", Name: "x"}, Tool: &event.Tool{Name: "bash"},
					Model: &event.Model{}, Loss: &event.Loss{Count: 1, Source: "forged"},
					Kernel: &event.Kernel{Release: "forged", Capabilities: []event.Capability{{Name: event.CapUnixEnforce, Have: true}}}}
				err := s.rewrite(e, 512, p.a, now)
				if contains(p.may, kind) {
					if err != nil {
						t.Errorf("rewrite(%s) = %v, want nil", kind, err)
					}
					if e.Loss != nil || e.Kernel != nil {
						t.Errorf("rewrite(%s) kept another category's payload: loss %v, kernel %v", kind, e.Loss, e.Kernel)
					}
					return
				}
				var ke *kindError
				if !errors.As(err, &ke) || !strings.Contains(err.Error(), p.message) ||
					!strings.Contains(err.Error(), "may send only "+strings.Join(p.may, ", ")) {
					t.Errorf("rewrite(%s) = %v, want it refused as %q, naming %v", kind, err, p.message, p.may)
				}
				if e.Source != event.SourceKernel || e.Proc.Pid != 1 {
					t.Errorf("rewrite(%s) changed the refused event: source %s, proc %+v", kind, e.Source, e.Proc)
				}
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// memApp is an Appender that keeps what it is given.
type memApp struct {
	mu  sync.Mutex
	evs []*event.Event
	err error
}

func (m *memApp) Append(_ context.Context, evs ...*event.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.evs = append(m.evs, evs...)
	return nil
}

// TestForgedKindAlert: a batch in which a process in a session sends kinds
// that only the host writes gets those events rejected with the message the
// client prints, keeps the rest, and journals one alert in the session,
// after the batch's events, that names the refused kinds and the peer. Root
// outside every session is refused such kinds without an alert.
func TestForgedKindAlert(t *testing.T) {
	forged := func(id, kind, payload string) string {
		return fmt.Sprintf(`{"v":1,"ts":"2026-01-02T03:04:05Z","session_id":"other","kind":%q,"source":"mirror","event_id":%q,%s}`,
			kind, id, payload)
	}
	fetch := `"pkg":{"ecosystem":"npm","name":"left-pad","resolved":"1.3.0","hash":"sha512-AAAA","verified":true,"outcome":"served"}`
	install := `"pkg":{"ecosystem":"npm","name":"left-pad","resolved":"1.3.0","hash":"sha512-AAAA"}`
	session := sender{pid: 4242, uid: 65534, cgroupID: 77, session: "sess-1"}
	tests := []struct {
		name       string
		a          sender
		events     []string
		wantStatus []ingest.Status
		wantKinds  []string // the journaled events' kinds, in order
		summary    string   // the alert's, when there is one
	}{
		{"session peer forges among its own", session, []string{
			forged("f1", "pkg.fetch", fetch),
			forged("i1", "pkg.install", install),
			forged("a1", "alert", `"alert":{"rule_id":"r","title":"t","level":"high"}`),
			forged("p1", "process.exec", `"proc":{"pid":1}`),
			forged("f2", "pkg.fetch", fetch),
			forged("l1", "pkg.filter", `"pkg":{"ecosystem":"npm","name":"left-pad"}`),
		}, []ingest.Status{ingest.StatusRejected, ingest.StatusOK, ingest.StatusRejected, ingest.StatusRejected,
			ingest.StatusRejected, ingest.StatusRejected},
			[]string{event.KindPkgInstall, event.KindAlert},
			`pid 4242 (uid 65534) sent 5 events of kinds "pkg.fetch", "alert", "process.exec", "pkg.filter" through the ingest socket; refused`},
		{"session peer forges alone", session, []string{forged("f1", "pkg.fetch", fetch)},
			[]ingest.Status{ingest.StatusRejected}, []string{event.KindAlert},
			`pid 4242 (uid 65534) sent an event of kind "pkg.fetch" through the ingest socket; refused`},
		{"root outside every session", sender{pid: 43, uid: 0}, []string{
			forged("p1", "process.exec", `"proc":{"pid":1}`),
			forged("f1", "pkg.fetch", fetch),
		}, []ingest.Status{ingest.StatusRejected, ingest.StatusOK}, []string{event.KindPkgFetch}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &memApp{}
			s := New(app, NewTable(), WithHost("test-host"))
			batch, err := ingest.DecodeBatch(request(tt.events...))
			if err != nil {
				t.Fatal(err)
			}
			b := &pending{results: make([]ingest.Result, batch.Len())}
			s.triage(b, batch, tt.a)
			s.store(b)
			for i, w := range tt.wantStatus {
				r := b.results[i]
				if r.Status != w {
					t.Errorf("result %d = %+v, want %s", i, r, w)
				}
				if r.Status == ingest.StatusRejected && !strings.Contains(r.Error, "only the host writes it") {
					t.Errorf("result %d: error %q does not say that only the host writes the kind", i, r.Error)
				}
				if r.Status == ingest.StatusRejected && tt.a.session != "" && !strings.Contains(r.Error, RuleForgedKind) {
					t.Errorf("result %d: error %q does not say that the attempt is recorded", i, r.Error)
				}
			}
			var got []string
			for _, e := range app.evs {
				got = append(got, e.Kind)
				if e.Kind != event.KindPkgFetch || e.Source == event.SourceAPI {
					continue
				}
				t.Errorf("root's pkg.fetch journaled with source %s, want api", e.Source)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantKinds, ",") {
				t.Fatalf("journaled kinds %v, want %v", got, tt.wantKinds)
			}
			if tt.summary == "" {
				return
			}
			al := app.evs[len(app.evs)-1]
			if err := al.Validate(); err != nil {
				t.Errorf("the alert does not validate: %v", err)
			}
			if al.SessionID != "sess-1" || al.Source != event.SourceRules || al.Host != "test-host" || al.EventID != "" ||
				al.Proc == nil || al.Proc.Pid != 4242 || al.Proc.UID == nil || *al.Proc.UID != 65534 || al.Proc.CgroupID != 77 {
				t.Errorf("alert: session %q, source %s, host %q, event_id %q, proc %+v; want the peer's session and process, from the rules",
					al.SessionID, al.Source, al.Host, al.EventID, al.Proc)
			}
			if a := al.Alert; a == nil || a.RuleID != RuleForgedKind || a.Level != "high" || a.Summary != tt.summary || len(a.Refs) != 0 {
				t.Errorf("alert = %+v, want %s, high, summary %q, no refs", a, RuleForgedKind, tt.summary)
			}
		})
	}
}

// TestForgedKindsBounded: an alert names at most maxForgedKinds kinds, and
// says when there were more.
func TestForgedKindsBounded(t *testing.T) {
	var f forgery
	for i := range 2 * maxForgedKinds {
		f.add(fmt.Sprintf("net.k%d", i))
		f.add(fmt.Sprintf("net.k%d", i))
	}
	a := (&Server{}).forgedAlert(sender{pid: 1, uid: 2, session: "s"}, &f, time.Unix(1, 0))
	if f.n != 4*maxForgedKinds || len(f.kinds) != maxForgedKinds || !strings.Contains(a.Alert.Summary, `"net.k7" and others`) ||
		strings.Contains(a.Alert.Summary, "net.k8") {
		t.Errorf("%d events, kinds %v, summary %q; want %d events, %d kinds and others", f.n, f.kinds, a.Alert.Summary,
			4*maxForgedKinds, maxForgedKinds)
	}
}
