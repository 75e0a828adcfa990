package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestReport: report prints the line by default, Markdown and JSON on
// request, writes the HTML page with --html, and exits 8 under --fail-on
// when an alert is at or above the level (and 0 when none is); an
// unknown session is a usage error.
func TestReport(t *testing.T) {
	data := t.TempDir()
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var evs []*event.Event
	add := func(kind string, src event.Source, f func(*event.Event)) {
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(len(evs)) * time.Millisecond), SessionID: "S", Kind: kind, Source: src}
		f(e)
		evs = append(evs, e)
	}
	add("session.start", event.SourceSession, func(e *event.Event) { e.Session = &event.Session{Op: "start"} })
	add("process.exec", event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 10, Argv: []string{"sh", "-c", "cat /etc/shadow"}, UID: event.U32(1000)}
	})
	add("file.read", event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 10}
		e.File = &event.File{Op: "read", Path: "/etc/shadow", Errno: "EACCES"}
	})
	add("alert", event.SourceRules, func(e *event.Event) {
		e.Alert = &event.Alert{RuleID: "sensitive_read", Title: "read of /etc/shadow", Level: "medium", Refs: []uint64{2}}
	})
	add("session.terminate", event.SourceSession, func(e *event.Event) {
		e.Session = &event.Session{Op: "terminate", Reason: "normal", ExitStatus: event.I32(0)}
	})
	queryFixture(t, data, evs)

	code, out := runCLI(t, "--data", data, "report", "S")
	if code != 0 || !strings.HasPrefix(out, "sandtrail: session S normal exit=0 4ms: 5 events, 1 processes") || !strings.Contains(out, "alerts 1 medium") {
		t.Errorf("report S = %d\n%s", code, out)
	}
	code, out = runCLI(t, "--data", data, "report", "S", "--format", "md")
	if code != 0 || !strings.Contains(out, "**Alerts** (1)") || !strings.Contains(out, "**Sensitive files** (1)") {
		t.Errorf("report --format md = %d\n%s", code, out)
	}
	code, out = runCLI(t, "--data", data, "report", "S", "--format", "json")
	var r struct {
		SessionID string `json:"session_id"`
		Alerts    []struct {
			RuleID string `json:"rule_id"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.SessionID != "S" || len(r.Alerts) != 1 {
		t.Errorf("report --format json = %d, %v: %+v\n%s", code, err, r, out)
	}
	page := filepath.Join(t.TempDir(), "s.html")
	if code, out = runCLI(t, "--data", data, "report", "S", "--html", page); code != 0 {
		t.Fatalf("report --html = %d\n%s", code, out)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `<tr class="alert"`) {
		t.Errorf("the page: %v\n%.300s", err, b)
	}
	if code, out = runCLI(t, "--data", data, "report", "S", "--fail-on", "medium"); code != exitAlerted {
		t.Errorf("report --fail-on medium = %d, want %d\n%s", code, exitAlerted, out)
	}
	if code, out = runCLI(t, "--data", data, "report", "S", "--fail-on", "high"); code != 0 {
		t.Errorf("report --fail-on high = %d, want 0\n%s", code, out)
	}
	if code, out = runCLI(t, "--data", data, "report", "S", "--fail-on", "severe"); code != exitFailed || !strings.Contains(out, "want one of") {
		t.Errorf("report --fail-on severe = %d\n%s", code, out)
	}
	if code, out = runCLI(t, "--data", data, "report", "nope"); code != exitFailed || !strings.Contains(out, `no events recorded for session "nope"`) {
		t.Errorf("report nope = %d\n%s", code, out)
	}
}

// TestTimelineViews: the timeline lists every sensitive path however many
// (and bounds the others, saying how many lines it left out), hides the
// caches' file events and a PATH search's misses unless --all (saying so),
// draws --depth levels (counting what is beneath, install scripts and
// failures among them), and keeps a deep chain's indent bounded.
func TestTimelineViews(t *testing.T) {
	data := t.TempDir()
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var evs []*event.Event
	add := func(kind string, f func(*event.Event)) {
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(len(evs)) * time.Millisecond), SessionID: "S", Kind: kind, Source: event.SourceKernel}
		f(e)
		evs = append(evs, e)
	}
	exec := func(pid, ppid int32, argv ...string) {
		add("process.exec", func(e *event.Event) {
			e.Proc = &event.Proc{Pid: pid, PPid: ppid, Argv: argv, StartTS: t0.Add(time.Duration(pid) * time.Microsecond)}
		})
	}
	file := func(op, path string) {
		add("file."+op, func(e *event.Event) { e.Proc = &event.Proc{Pid: 10}; e.File = &event.File{Op: op, Path: path} })
	}
	add("process.exec_failed", func(e *event.Event) { e.Proc = &event.Proc{Pid: 10, Exe: "/usr/local/bin/sh", Errno: "ENOENT"} })
	exec(10, 1, "sh")
	for i := range 30 { // a chain 30 deep beneath sh
		exec(int32(11+i), int32(10+i), "sh", "-c", "x")
	}
	for i := range 15 {
		file("read", fmt.Sprintf("/home/a/.ssh/decoy%d", i))
	}
	for i := range 20 {
		file("create", fmt.Sprintf("/work/d%d/f", i))
	}
	file("create", "/home/a/.npm/_cacache/index-v5/x")
	queryFixture(t, data, evs)

	_, out := runCLI(t, "--data", data, "timeline", "S")
	if n := strings.Count(out, "[sensitive]"); n != 15 {
		t.Errorf("%d sensitive lines, want all 15:\n%s", n, out)
	}
	for _, want := range []string{"files (35 paths)", "… 8 more lines (sandtrail report S", "not shown: 1 file events in package-manager caches, 1 failed execs of PATH searches (--all shows them)", "[depth 25] 34 sh -c x"} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 400 {
			t.Errorf("a line of %d bytes: the indent is not bounded: %.120q", len(line), line)
		}
	}
	_, out = runCLI(t, "--data", data, "timeline", "S", "--all")
	if !strings.Contains(out, "files (36 paths)") || !strings.Contains(out, "exec failed: /usr/local/bin/sh (ENOENT)") || strings.Contains(out, "not shown") {
		t.Errorf("timeline --all hides something:\n%s", out)
	}
	_, out = runCLI(t, "--data", data, "timeline", "S", "--depth", "2")
	if !strings.Contains(out, "… 29 more processes beneath (0 install-script processes, 0 failed or killed) (--depth)") {
		t.Errorf("timeline --depth 2:\n%s", out)
	}
}
