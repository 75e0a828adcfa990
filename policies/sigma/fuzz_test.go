package sigma

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	yaml "go.yaml.in/yaml/v3"
)

// sampleEvents are one event of each category, for the fuzz targets to
// evaluate loaded rules against.
func sampleEvents() []*event.Event {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []*event.Event{
		{Seq: 1, TS: ts, SessionID: "s", Kind: event.KindExec, Proc: &event.Proc{Pid: 10, PPid: 1, UID: event.U32(0),
			Exe: "/bin/sh", ExePath: "/usr/bin/dash", Argv: []string{"sh", "-c", "curl http://x/a | sh"}, Cwd: "/tmp"}},
		{Seq: 2, TS: ts, SessionID: "s", Kind: event.KindFork, Proc: &event.Proc{Pid: 11, PPid: 10}},
		{Seq: 3, TS: ts, SessionID: "s", Kind: event.KindExec, Proc: &event.Proc{Pid: 11, PPid: 10, Exe: "curl", Argv: []string{"curl", "É"}}},
		{Seq: 4, TS: ts, SessionID: "s", Kind: event.KindFileCreate, Proc: &event.Proc{Pid: 11}, File: &event.File{Op: "create", Path: "/tmp/x"}},
		{Seq: 5, TS: ts, SessionID: "s", Kind: event.KindNetConnect, Proc: &event.Proc{Pid: 11}, Net: &event.Net{Op: "connect", DstIP: "10.0.0.1", DstPort: 80}},
		{Seq: 6, TS: ts, SessionID: "s", Kind: event.KindNetDNS, Net: &event.Net{Op: "dns", DNS: &event.DNS{Query: "x", QType: "A", Answers: []event.DNSAnswer{{Type: "A", Data: "10.0.0.1"}}}}},
		{Seq: 7, TS: ts, SessionID: "s", Kind: event.KindPkgInstall, Pkg: &event.Pkg{Ecosystem: "npm", Name: "x", Verified: event.Bool(true)}},
		{Seq: 8, TS: ts, SessionID: "s", Kind: event.KindSessionStart, Session: &event.Session{Op: "start"}},
		{Seq: 9, TS: ts, SessionID: "s", Kind: event.KindLimitHit, Limit: &event.Limit{Type: "pids", Measured: 3}},
		{Seq: 10, TS: ts, SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "bash"}},
		{Seq: 11, TS: ts, SessionID: "s", Kind: event.KindExit, Proc: &event.Proc{Pid: 11}},
		{Seq: 12, TS: ts, SessionID: "s", Kind: "file.unknown_op", File: &event.File{Op: "unknown_op"}},
	}
}

// FuzzLoad: a rule file either fails to load with an error or loads into
// rules that evaluate every sample event without panicking.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("../rules/sigmahq/*.yml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(corrRule("    type: event_count\n    rules:\n        - outbound_connect\n    group-by:\n        - net.dst_port\n    timespan: 1m\n    condition:\n        gte: 2\n")))
	f.Add([]byte(ruleYAML("T", "sandtrail", "process", "    sel:\n        proc.argv|contains|all:\n            - a\n            - '*b?'\n        proc.pid|gt: 1\n    f:\n        proc.exe|re|i: '^/bin'\n    condition: sel and not f\n")))
	f.Add([]byte(ruleYAML("T", "linux", "network_connection", "    sel:\n        DestinationIp|cidr: 10.0.0.0/8\n        Initiated: 'true'\n    condition: 1 of them\n")))
	f.Add([]byte(ruleYAML("T", "linux", "process_creation", "    sel:\n        CommandLine|base64offset|contains: curl\n        ParentImage|windash|endswith: -sh\n    condition: all of sel*\n")))
	f.Add([]byte("a: &a [x]\nb: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.yml", data)
		if err != nil {
			if set != nil {
				t.Fatal("Parse returned a set and an error")
			}
			return
		}
		ev := NewEvaluator(set, MaxProcs(4), MaxGroups(4), MaxWindow(4))
		for _, e := range sampleEvents() {
			for _, m := range ev.Observe(e) {
				if len(m.Seqs) == 0 || m.Rule == nil {
					t.Fatalf("match %+v has no events or no rule", m)
				}
			}
		}
	})
}

// FuzzCondition: a condition string either fails to parse or parses into
// a tree that evaluates on every combination of its selections without
// panicking.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{
		"sel", "sel and not filter", "1 of sel* and not 1 of filter*", "all of them", "2 of them",
		"(sel or _x) and not (filter)", "not not not sel", "3 of sel_*", "sel | count() > 3", "((((sel))))",
	} {
		f.Add(s)
	}
	det := "    sel:\n        proc.argv: a\n    sel_b:\n        proc.argv: b\n    filter:\n        proc.argv: c\n    _x:\n        proc.argv: d\n    condition: sel\n"
	set, err := Parse("f.yml", []byte(ruleYAML("T", "sandtrail", "process", det)))
	if err != nil {
		f.Fatal(err)
	}
	r := set.Rules()[0]
	names := make([]string, len(r.sels))
	for i, s := range r.sels {
		names[i] = s.name
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCondition(s, names)
		if err != nil {
			return
		}
		ev := NewEvaluator(set)
		for mask := 0; mask < 16; mask++ {
			args := []string{"p"}
			for i, l := range []string{"a", "b", "c", "d"} {
				if mask&(1<<i) != 0 {
					args = append(args, l)
				}
			}
			ev.v.reset(&event.Event{Kind: event.KindExec, Proc: &event.Proc{Argv: args}})
			n.eval(r.sels, &ev.v)
		}
	})
}

// FuzzValue builds a rule from a fuzzed field, modifier chain and value
// (quoted by the YAML encoder, so every input is a well-formed document)
// and matches it against a fuzzed command line: the rule either fails to
// load or evaluates without panicking, and a cased plain value with no
// wildcards matches exactly the text equal to it.
func FuzzValue(f *testing.F) {
	f.Add("CommandLine", "contains|all", "a*b?c", "xxabyc")
	f.Add("CommandLine", "re|i", `^(a|b)+\d{2,3}$`, "ab12")
	f.Add("CommandLine", "base64offset|contains", "http://", "aHR0cDovLw==")
	f.Add("CommandLine", "windash|startswith", "-e", "/e")
	f.Add("ProcessId", "gte", "10", "")
	f.Add("User", "fieldref", "CommandLine", "root")
	f.Add("CommandLine", "cidr", "10.0.0.0/8", "10.1.1.1")
	f.Add("CommandLine", "cased", `\*\?\\`, `*?\`)
	f.Fuzz(func(t *testing.T, fieldName, mods, val, text string) {
		key := fieldName
		if mods != "" {
			key += "|" + mods
		}
		rule := map[string]any{
			"title":     "Fuzz",
			"logsource": map[string]string{"product": "linux", "category": "process_creation"},
			"detection": map[string]any{"sel": map[string]any{key: val}, "condition": "sel"},
		}
		data, err := yaml.Marshal(rule)
		if err != nil {
			return
		}
		set, err := Parse("fuzz.yml", data)
		if err != nil {
			return
		}
		ev := NewEvaluator(set)
		e := &event.Event{Seq: 1, Kind: event.KindExec, SessionID: "s",
			Proc: &event.Proc{Pid: 10, PPid: 1, UID: event.U32(0), ExePath: text, Argv: []string{text}, Cwd: text}}
		got := len(ev.Observe(e)) == 1
		if fieldName == "CommandLine" && mods == "cased" && !strings.ContainsAny(val, `*?\`) && text != "" && val != "" {
			if want := text == val; got != want {
				t.Fatalf("CommandLine|cased %q on %q: matched %v, want %v", val, text, got, want)
			}
		}
	})
}
