package sigma

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// benchRules are 20 rules over the categories a session's stream mostly
// holds: the three SigmaHQ rules and 17 of sandtrail's own.
func benchRules(b *testing.B) *Set {
	var src strings.Builder
	for _, f := range []string{"proc_creation_lnx_base64_execution.yml", "proc_creation_lnx_susp_pipe_shell.yml", "proc_creation_lnx_curl_wget_exec_tmp.yml"} {
		data, err := os.ReadFile("../rules/sigmahq/" + f)
		if err != nil {
			b.Fatal(err)
		}
		src.Write(data)
		src.WriteString("\n---\n")
	}
	own := []struct{ cat, det string }{
		{"process", "    sel:\n        kind: process.exec\n        proc.exe_path|endswith:\n            - /nc\n            - /ncat\n            - /socat\n    condition: sel\n"},
		{"process", "    sel:\n        proc.argv|contains: '/dev/tcp/'\n    condition: sel\n"},
		{"process", "    sel:\n        proc.fileless: true\n    condition: sel\n"},
		{"process", "    sel:\n        kind: process.ptrace\n    filter:\n        proc.ptrace.request: traceme\n    condition: sel and not filter\n"},
		{"process", "    sel:\n        proc.exe_path|startswith:\n            - /tmp/\n            - /dev/shm/\n    condition: sel\n"},
		{"process", "    sel:\n        parent.comm: node\n        proc.comm:\n            - sh\n            - bash\n    condition: sel\n"},
		{"process", "    sel:\n        proc.argv|re: '^-?-?exec(=|$)'\n        proc.comm: find\n    condition: sel\n"},
		{"file", "    sel:\n        file.path|startswith:\n            - /etc/\n            - /root/.ssh/\n        file.op:\n            - write\n            - create\n    condition: sel\n"},
		{"file", "    sel:\n        file.path|endswith:\n            - /.npmrc\n            - /.pypirc\n            - /credentials\n    condition: sel\n"},
		{"file", "    sel:\n        file.path|contains: '/.git/hooks/'\n    condition: sel\n"},
		{"network", "    sel:\n        net.dst_port:\n            - 4444\n            - 1337\n            - 31337\n    condition: sel\n"},
		{"network", "    sel:\n        net.verdict: blocked\n    condition: sel\n"},
		{"network", "    sel:\n        net.dst_ip|cidr: 169.254.169.254/32\n    condition: sel\n"},
		{"dns", "    sel:\n        net.dns.query|endswith:\n            - .onion\n            - .ngrok.io\n    condition: sel\n"},
		{"package", "    sel:\n        pkg.verified: false\n    condition: sel\n"},
		{"package", "    sel:\n        pkg.install_scripts|exists: true\n        pkg.direct: false\n    condition: sel\n"},
		{"limit", "    sel:\n        limit.type: pids\n    condition: sel\n"},
	}
	for i, r := range own {
		src.WriteString(ruleYAML(fmt.Sprintf("Bench %d", i), "sandtrail", r.cat, r.det))
		src.WriteString("\n---\n")
	}
	set, err := Parse("bench.yml", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	if n := len(set.Rules()); n != 20 {
		b.Fatalf("%d rules, want 20", n)
	}
	return set
}

// benchEvents is a stream in the proportions of a package install:
// mostly file events, execs and connects, none of which match.
func benchEvents() []*event.Event {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []*event.Event
	for i := int32(0); i < 64; i++ {
		pid := 1000 + i
		out = append(out,
			&event.Event{Seq: uint64(len(out)), TS: ts, SessionID: "s", Kind: event.KindFork, Proc: &event.Proc{Pid: pid, PPid: 999}},
			&event.Event{Seq: uint64(len(out) + 1), TS: ts, SessionID: "s", Kind: event.KindExec, Proc: &event.Proc{Pid: pid, PPid: 999, UID: event.U32(1000),
				Comm: "node", Exe: "/usr/bin/node", ExePath: "/usr/bin/node", Argv: []string{"node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "install", "left-pad"}, Cwd: "/home/agent/app"}},
		)
		for j := 0; j < 6; j++ {
			out = append(out, &event.Event{Seq: uint64(len(out)), TS: ts, SessionID: "s", Kind: event.KindFileCreate,
				Proc: &event.Proc{Pid: pid, Comm: "node"}, File: &event.File{Op: "create", Path: fmt.Sprintf("/home/agent/app/node_modules/left-pad/lib/f%d.js", j)}})
		}
		out = append(out, &event.Event{Seq: uint64(len(out)), TS: ts, SessionID: "s", Kind: event.KindNetConnect,
			Proc: &event.Proc{Pid: pid, Comm: "node"}, Net: &event.Net{Op: "connect", Proto: "tcp", DstIP: "127.0.0.1", DstPort: 8080, Verdict: "allowed"}})
		out = append(out, &event.Event{Seq: uint64(len(out)), TS: ts, SessionID: "s", Kind: event.KindExit, Proc: &event.Proc{Pid: pid}})
	}
	return out
}

// BenchmarkObserve measures Observe per event over 20 rules and a stream
// in which nothing matches.
func BenchmarkObserve(b *testing.B) {
	set := benchRules(b)
	events := benchEvents()
	ev := NewEvaluator(set)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m := ev.Observe(events[i%len(events)]); len(m) != 0 {
			b.Fatalf("event %d raised %v", i%len(events), titles(m))
		}
	}
}

// BenchmarkObserveExec measures a process.exec alone: the category with
// the most rules, the command line built once per event.
func BenchmarkObserveExec(b *testing.B) {
	set := benchRules(b)
	e := benchEvents()[1]
	ev := NewEvaluator(set)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m := ev.Observe(e); len(m) != 0 {
			b.Fatalf("raised %v", titles(m))
		}
	}
}
