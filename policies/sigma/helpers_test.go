package sigma

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// ruleYAML wraps a detection section (indented by four spaces) into a
// complete rule of the logsource.
func ruleYAML(title, product, category, detection string) string {
	return "title: " + title + "\n" +
		"id: " + newID() + "\n" +
		"status: test\nlevel: high\nauthor: tests\ntags:\n    - attack.t1059\n" +
		"logsource:\n    product: " + product + "\n    category: " + category + "\n" +
		"detection:\n" + detection
}

var ids int

// newID returns a fresh UUID for a test rule.
func newID() string { ids++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", ids) }

func mustParse(t *testing.T, src string) *Set {
	t.Helper()
	s, err := Parse("test.yml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror: %v", src, err)
	}
	return s
}

// titles returns the titles of the matches, sorted.
func titles(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Title)
	}
	slices.Sort(out)
	return out
}

var seq uint64

func next() uint64 { seq++; return seq }

func exec(session string, pid, ppid int32, exePath string, argv ...string) *event.Event {
	return &event.Event{
		V: event.SchemaVersion, Seq: next(), TS: t0, SessionID: session, Kind: event.KindExec,
		Source: event.SourceKernel,
		Proc: &event.Proc{Pid: pid, PPid: ppid, UID: event.U32(1000), Exe: exePath, ExePath: exePath,
			Argv: argv, Cwd: "/home/agent", Comm: lastElem(exePath)},
	}
}

func lastElem(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func fork(session string, child, parent int32) *event.Event {
	return &event.Event{V: event.SchemaVersion, Seq: next(), TS: t0, SessionID: session, Kind: event.KindFork,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: child, PPid: parent}}
}

func exit(session string, pid int32) *event.Event {
	return &event.Event{V: event.SchemaVersion, Seq: next(), TS: t0, SessionID: session, Kind: event.KindExit,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: pid, ExitCode: event.I32(0)}}
}

func connect(session string, ts time.Time, dst string, port uint16) *event.Event {
	return &event.Event{V: event.SchemaVersion, Seq: next(), TS: ts, SessionID: session, Kind: event.KindNetConnect,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: 50, Exe: "/usr/bin/curl", ExePath: "/usr/bin/curl"},
		Net: &event.Net{Op: "connect", Proto: "tcp", SrcIP: "10.0.0.2", SrcPort: 40000, DstIP: dst, DstPort: port, Verdict: "allowed"}}
}

func fileEv(session, kind, op, path string) *event.Event {
	return &event.Event{V: event.SchemaVersion, Seq: next(), TS: t0, SessionID: session, Kind: kind,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: 60, Exe: "/bin/cp", ExePath: "/usr/bin/cp", Argv: []string{"cp", "a", path}},
		File: &event.File{Op: op, Path: path}}
}
