package timeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// TestSummarize: the summary counts the session's own events from the seq
// it began at (not another session's, not what came before), its alerts,
// limit hits and losses, the host-wide losses while it ran, and its
// snapshot; and it verifies the journal with the verifiers it is given,
// saying so when they cannot be loaded.
func TestSummarize(t *testing.T) {
	ctx := context.Background()
	j, dir := journaltest.Open(t)
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	add := func(sess, kind string, src event.Source, f func(*event.Event)) {
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(j.Size()) * time.Second), SessionID: sess, Kind: kind, Source: src}
		if f != nil {
			f(e)
		}
		if err := j.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(e *event.Event) { e.Proc = &event.Proc{Pid: 10, Argv: []string{"true"}} }
	add("S", event.KindExec, event.SourceKernel, exec) // before the session's start: not counted
	from := j.Size()
	add("S", event.KindExec, event.SourceKernel, exec)
	add("T", event.KindExec, event.SourceKernel, exec)
	add("S", event.KindLimitHit, event.SourceSession, func(e *event.Event) {
		e.Limit = &event.Limit{Type: "pids", Measured: 64, Configured: 64, Unit: "count"}
	})
	add("S", event.KindLoss, event.SourceKernel, func(e *event.Event) { e.Loss = &event.Loss{Count: 3, Source: "ringbuf"} })
	add("", event.KindLoss, event.SourceKernel, func(e *event.Event) { e.Loss = &event.Loss{Count: 5, Source: "ringbuf", HostWide: true} })
	add("S", event.KindAlert, event.SourceRules, func(e *event.Event) {
		e.Alert = &event.Alert{RuleID: "r1", Title: "a thing", Level: "high"}
	})
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	r := Run{SessionID: "S", HostedBy: "this process", Reason: "normal", Started: t0, Ended: t0.Add(1500 * time.Millisecond),
		From: from, KernelFrom: from}
	noKeys := Sources{Verifiers: func() (note.Verifiers, error) { return nil, errors.New("no verifier key") }}
	s := Summarize(dir, r, noKeys)
	if s.Events != 5 || s.ByCategory["process"] != 1 || len(s.Alerts) != 1 || len(s.Limits) != 1 || s.Lost != 3 || s.LostHostWide != 5 {
		t.Errorf("Summarize = %d events %v, alerts %v, limits %v, lost %d, host-wide %d; want 5, 1 process, 1 alert, 1 limit, 3, 5",
			s.Events, s.ByCategory, s.Alerts, s.Limits, s.Lost, s.LostHostWide)
	}
	if len(s.Alerts) == 1 && s.Alerts[0] != "high r1: a thing" {
		t.Errorf("alert = %q, want %q", s.Alerts[0], "high r1: a thing")
	}
	if s.Duration != "1.5s" || s.DurationMS != 1500 {
		t.Errorf("duration = %s, %d ms; want 1.5s, 1500", s.Duration, s.DurationMS)
	}
	if s.Journal.Status != "error" || !strings.Contains(s.Journal.Error, "no verifier key") {
		t.Errorf("journal without verifiers = %+v, want status error naming the cause", s.Journal)
	}
	_, wrong := journaltest.Keys(t, "sandtrail-test")
	s = Summarize(dir, r, Sources{Verifiers: func() (note.Verifiers, error) { return wrong, nil }})
	if s.Journal.Status == "intact" || s.Journal.Error == "" {
		t.Errorf("journal with another key's verifier = %+v, want it not intact", s.Journal)
	}
}
