package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// knownSession is a small session with one of everything the report
// shows: a shell that runs npm, whose package's postinstall script runs
// curl piped to sh; a blocked package; DNS lookups; a blocked connect;
// a sensitive read; cache noise; a tool invocation; an OOM kill; and an
// alert naming two events. Argv and paths carry markup an agent could
// have chosen.
func knownSession() []*event.Event {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	uid := uint32(1000)
	zero := int32(0)
	p := func(pid, ppid int32, start int, argv ...string) *event.Proc {
		return &event.Proc{Pid: pid, PPid: ppid, UID: &uid, Argv: argv, Comm: argv[0], Exe: "/usr/bin/" + argv[0], StartTS: at(start), Cwd: "/work"}
	}
	ev := func(ms int, kind string, src event.Source, f func(*event.Event)) *event.Event {
		e := &event.Event{V: event.SchemaVersion, TS: at(ms), SessionID: "S1", Kind: kind, Source: src}
		f(e)
		return e
	}
	kern := event.SourceKernel
	return []*event.Event{
		ev(0, event.KindSessionCreate, event.SourceSession, func(e *event.Event) {
			e.Session = &event.Session{Op: "create", User: "agent", Host: "h1", Limits: &event.Limits{MemoryBytes: 512 << 20, Pids: 128}}
		}),
		ev(1, event.KindSessionStart, event.SourceSession, func(e *event.Event) { e.Session = &event.Session{Op: "start"} }),
		ev(2, event.KindExec, kern, func(e *event.Event) { e.Proc = p(100, 1, 2, "sh", "agent.sh") }),
		ev(3, event.KindExec, kern, func(e *event.Event) {
			e.Proc = p(101, 100, 3, "npm", "install", "<script>alert(1)</script>")
		}),
		ev(4, event.KindPkgInstall, event.SourceShim, func(e *event.Event) {
			e.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: "evil-pkg", Requested: "^1.0.0", Resolved: "1.0.1",
				SourceURL: "https://registry.npmjs.org/evil-pkg/-/evil-pkg-1.0.1.tgz", Hash: "sha512-abc"}
		}),
		ev(4, event.KindExec, kern, func(e *event.Event) {
			e.Proc = p(103, 101, 4, "sh", "-c", "node install.js")
			e.Proc.Cwd = "/work/node_modules/evil-pkg"
		}),
		ev(5, event.KindFileCreate, kern, func(e *event.Event) {
			e.Proc = p(101, 100, 3, "npm")
			e.File = &event.File{Op: "create", Path: "/home/agent/.npm/_cacache/index-v5/aa/bb"}
		}),
		ev(6, event.KindFileRead, kern, func(e *event.Event) {
			e.Proc = p(100, 1, 2, "sh")
			e.File = &event.File{Op: "read", Path: "/etc/shadow", Errno: "EACCES"}
		}),
		ev(7, event.KindNetDNS, kern, func(e *event.Event) {
			e.Net = &event.Net{Op: "dns", Proto: "udp", Verdict: "blocked", DNS: &event.DNS{Query: "exfil.example", QType: "A", RCode: "NXDOMAIN"}}
		}),
		ev(8, event.KindNetConnect, kern, func(e *event.Event) {
			e.Proc = p(100, 1, 2, "sh")
			e.Net = &event.Net{Op: "connect", Proto: "tcp", DstIP: "192.0.2.254", DstPort: 80, Verdict: "blocked", Reason: "blocked_cidrs"}
		}),
		ev(9, event.KindNetClose, kern, func(e *event.Event) {
			e.Net = &event.Net{Op: "close", Proto: "tcp", DstIP: "127.0.0.1", DstPort: 4873, BytesOut: 300, BytesIn: 9000}
		}),
		ev(10, event.KindPkgBlocked, event.SourceShim, func(e *event.Event) {
			e.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: "event-stream", Requested: "3.3.6", Verdict: "block", Reason: "blocklisted"}
		}),
		ev(11, event.KindToolInvoke, event.SourceShim, func(e *event.Event) {
			e.Tool = &event.Tool{Name: "read_file", Server: "fs", Status: "ok", DurationMS: 4, IO: event.IO{InputSummary: `{"path":"README.md"}`}}
		}),
		ev(12, event.KindLimitHit, event.SourceSession, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 102, Comm: "python3"}
			e.Limit = &event.Limit{Type: event.LimitMemory, Measured: 512 << 20, Configured: 512 << 20, Unit: "bytes", Action: event.ActionKill}
		}),
		ev(13, event.KindExit, kern, func(e *event.Event) { e.Proc = p(101, 100, 3, "npm"); e.Proc.ExitCode = &zero }),
		ev(14, event.KindAlert, event.SourceRules, func(e *event.Event) {
			e.Alert = &event.Alert{RuleID: "credential_read", Title: "a <b>sensitive</b> file was read", Level: "high", Refs: []uint64{8, 9}}
		}),
		ev(15, event.KindExit, kern, func(e *event.Event) { e.Proc = p(100, 1, 2, "sh"); e.Proc.ExitCode = &zero }),
		ev(16, event.KindSessionTerminate, event.SourceSession, func(e *event.Event) {
			e.Session = &event.Session{Op: "terminate", Reason: "normal", ExitStatus: &zero}
		}),
	}
}

func buildKnown(t *testing.T, opts ...Option) *Report {
	t.Helper()
	b := New("S1", opts...)
	for i, e := range knownSession() {
		b.Add(uint64(i+1), e)
	}
	return b.Report()
}

// TestReport: the report holds the tree, the packages, the network view,
// the files (the sensitive one first, the cache's hidden unless WithAll),
// the tool call, the limit hit, and the alert with the events it names.
func TestReport(t *testing.T) {
	r := buildKnown(t)
	if len(r.Processes) != 1 || len(r.Processes[0].Children) != 1 || r.Processes[0].Children[0].Pid != 101 {
		t.Fatalf("process tree = %+v, want sh(100) > npm(101)", r.Processes)
	}
	if len(r.Packages) != 2 {
		t.Errorf("packages = %d, want 2 (evil-pkg, event-stream refused)", len(r.Packages))
	}
	if n := r.Network; len(n.Destinations) != 2 || n.Blocked != 1 || n.BlockedDestinations() != 1 || n.BlockedNames != 1 || len(n.Domains) != 1 || !n.Domains[0].Blocked {
		t.Errorf("network = %+v, want 2 destinations, 1 blocked, 1 blocked name", r.Network)
	}
	if d := r.Network.Destinations[1]; d.BytesIn != 9000 || d.BytesOut != 300 {
		t.Errorf("loopback destination = %+v, want its bytes each way", d)
	}
	if len(r.Files.Paths) != 1 || !r.Files.Paths[0].Sensitive || r.Files.Hidden != 1 {
		t.Errorf("files = %+v, want /etc/shadow (sensitive) and 1 hidden cache event", r.Files)
	}
	if all := buildKnown(t, WithAll()); len(all.Files.Paths) != 2 || all.Files.Hidden != 0 {
		t.Errorf("WithAll files = %+v, want both paths, none hidden", all.Files)
	}
	if len(r.Tools) != 1 || len(r.Limits) != 1 {
		t.Errorf("tools %d, limits %d; want 1 each", len(r.Tools), len(r.Limits))
	}
	// The journaled alert, and the package view's: npm ran from outside the
	// shim directory, and its package had no verified fetch.
	var rules []string
	for _, a := range r.Alerts {
		rules = append(rules, fmt.Sprintf("%s derived=%v", a.RuleID, a.Derived))
	}
	if got := strings.Join(rules, ", "); got != "credential_read derived=false, shim_bypass derived=true, unverified_install derived=true" {
		t.Errorf("alerts = %s", got)
	}
	if ref, ok := r.Refs[8]; !ok || ref.Kind != event.KindFileRead || !strings.Contains(ref.Summary, "/etc/shadow") {
		t.Errorf("Refs[8] = %+v, %v; want the read of /etc/shadow", ref, ok)
	}
	if r.Facts.Reason != "normal" || r.Facts.Duration() != 15*time.Millisecond || r.Facts.User != "agent" {
		t.Errorf("facts = %+v", r.Facts)
	}
	want := "sandtrail: session S1 normal exit=0 15ms: 18 events, 3 processes, 2 packages (1 refused), 2 destinations (1 blocked), 1 names blocked, 1 tool calls; alerts 3 high; journal -"
	if got := Line(r); got != want {
		t.Errorf("Line =\n%s\nwant\n%s", got, want)
	}
}

// TestHTMLEscapes: what the agent chose is text on the page, never markup,
// and the page loads nothing and runs nothing.
func TestHTMLEscapes(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, buildKnown(t)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script>alert(1)", "<b>sensitive</b>", "src=\"http", "href=\"http"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "default-src 'none'", `id="ref8"`, `href="#ref8"`,
		`class="package"`, "<svg", "<details open", "exfil.example", "read_file", "memory_oom"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestMarkdownEscapes: a cell cannot break its table, open a link or
// mention anyone: every value is a code span, its "|" escaped.
func TestMarkdownEscapes(t *testing.T) {
	b := New("S1")
	for i, e := range knownSession() {
		if e.Pkg != nil && e.Kind == event.KindPkgInstall {
			e.Pkg.Name = "@types/x|[y](http://z)<img>"
		}
		b.Add(uint64(i+1), e)
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, b.Report()); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	if !strings.Contains(md, "| ` @types/x\\|[y](http://z)<img> ` |") {
		t.Errorf("markdown does not escape the name:\n%s", md)
	}
	for _, want := range []string{"**Alerts** (3)", "**Packages** (3)", "**Blocked connections** (1)", "**Sensitive files** (1)", "| ` high ` | ` credential_read ` |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestInstallScripts: a process that a package's install script started is
// marked with its package in the tree, and listed under its package.
func TestInstallScripts(t *testing.T) {
	r := buildKnown(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`<span class="badge script">install script of npm evil-pkg 1.0.1</span>`,
		`<tr class="scripts">`, `what its install scripts did: 1 processes`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
