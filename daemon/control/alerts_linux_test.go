package control

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// journalDaemon raises alerts into a real journal; it drives no sessions
// (the test sends no session op).
type journalDaemon struct {
	Daemon
	j *journal.Journal
}

func (d journalDaemon) Raise(ctx context.Context, alerts []*event.Event) error {
	return d.j.Append(ctx, alerts...)
}

// TestControlAlerts: root outside every session journals alerts of
// sessions through OpAlerts; a request with any event that is not a valid
// alert of a session from the rules is refused whole.
func TestControlAlerts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	j, dir := journaltest.Open(t)
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	c := Serve(ln, journalDaemon{j: j}, attribution.New(sessionsOf{}), hclog.NewNullLogger())
	defer c.Close()
	alert := func(sess string) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: sess, Kind: event.KindAlert, Source: event.SourceRules,
			Alert: &event.Alert{RuleID: "known_malicious", Title: "t", Level: "critical", Advisory: "MAL-2026-1"}}
	}
	exec := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "s1", Kind: event.KindExec, Source: event.SourceKernel,
		Proc: &event.Proc{Pid: 1}}
	for _, tt := range []struct {
		name string
		evs  []*event.Event
		want string
	}{
		{"none", nil, "0 events"},
		{"not an alert", []*event.Event{alert("s1"), exec}, `event 1: kind "process.exec"`},
		{"no session", []*event.Event{alert("")}, "names no session"},
		{"invalid", []*event.Event{{V: event.SchemaVersion, TS: time.Now(), SessionID: "s1", Kind: event.KindAlert, Source: event.SourceRules}}, "alert: required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Call(path, &Request{Op: OpAlerts, Events: tt.evs}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("alerts = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if j.Size() != 0 {
		t.Fatalf("refused requests journaled %d events", j.Size())
	}
	if _, err := Call(path, &Request{Op: OpAlerts, Events: []*event.Event{alert("s1"), alert("s2")}}); err != nil {
		t.Fatalf("alerts = %v", err)
	}
	var got []string
	if err := journal.Scan(dir, 0, func(_ uint64, raw []byte) error {
		e, err := event.Unmarshal(raw)
		if err == nil && e.Alert != nil {
			got = append(got, e.SessionID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "s1,s2" {
		t.Errorf("journaled alerts of sessions %v, want s1,s2", got)
	}
}
