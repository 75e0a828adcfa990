package sigma

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const baseConnect = `title: Outbound connect
id: 0a000000-0000-4000-8000-000000000001
name: outbound_connect
logsource:
    product: sandtrail
    category: network
detection:
    sel:
        net.op: connect
    condition: sel
`

func corrRule(body string) string {
	return baseConnect + "---\ntitle: Correlated\nid: 0a000000-0000-4000-8000-0000000000c0\nlevel: high\ntags:\n    - attack.t1046\ncorrelation:\n" + body
}

// TestEventCount checks event_count: the third connect within a minute to
// one port raises one match naming the three events; events outside the
// window, of another session or another group do not count.
func TestEventCount(t *testing.T) {
	set := mustParse(t, corrRule("    type: event_count\n    rules:\n        - outbound_connect\n    group-by:\n        - net.dst_port\n    timespan: 1m\n    condition:\n        gte: 3\n"))
	ev := NewEvaluator(set)
	var seqs []uint64
	obs := func(session string, at time.Duration, port uint16) []Match {
		e := connect(session, t0.Add(at), "10.0.0.9", port)
		seqs = append(seqs, e.Seq)
		return ev.Observe(e)
	}
	if m := obs("s1", 0, 22); len(m) != 0 {
		t.Fatalf("first connect raised %v", titles(m))
	}
	obs("s2", time.Second, 22)   // another session
	obs("s1", 2*time.Second, 23) // another group
	if m := obs("s1", 3*time.Second, 22); len(m) != 0 {
		t.Fatalf("second connect raised %v", titles(m))
	}
	m := obs("s1", 4*time.Second, 22)
	if len(m) != 1 || m[0].Title != "Correlated" || m[0].Level != "high" {
		t.Fatalf("third connect: %+v, want one Correlated match", m)
	}
	if want := []uint64{seqs[0], seqs[3], seqs[4]}; !slices.Equal(m[0].Seqs, want) {
		t.Errorf("Seqs = %v, want %v", m[0].Seqs, want)
	}
	// The group starts over: two more are not enough.
	obs("s1", 5*time.Second, 22)
	if m := obs("s1", 6*time.Second, 22); len(m) != 0 {
		t.Errorf("after a match, two more raised %v", titles(m))
	}
	// Spread over more than the timespan, never three in a minute.
	ev = NewEvaluator(set)
	for i := 0; i < 6; i++ {
		if m := obs("s1", time.Duration(i)*40*time.Second, 22); len(m) != 0 {
			t.Fatalf("connect %d, 40 s apart, raised %v", i, titles(m))
		}
	}
	// The base rule raises nothing of its own (generate is false).
	for _, m := range NewEvaluator(set).Observe(connect("s1", t0, "10.0.0.9", 22)) {
		t.Errorf("base rule raised %q without generate", m.Title)
	}
}

// TestValueCount checks value_count: three distinct destinations raise a
// match; the same destination repeated does not.
func TestValueCount(t *testing.T) {
	set := mustParse(t, corrRule("    type: value_count\n    rules:\n        - 0a000000-0000-4000-8000-000000000001\n    group-by:\n        - proc.exe\n    timespan: 10m\n    condition:\n        field: net.dst_ip\n        gte: 3\n    generate: true\n"))
	ev := NewEvaluator(set)
	for i := 0; i < 5; i++ {
		for _, m := range ev.Observe(connect("s1", t0.Add(time.Duration(i)*time.Second), "10.0.0.1", 80)) {
			if m.Title == "Correlated" {
				t.Fatalf("repeated destination raised the correlation at %d", i)
			}
		}
	}
	var got []string
	for _, ip := range []string{"10.0.0.2", "10.0.0.3"} {
		got = append(got, titles(ev.Observe(connect("s1", t0.Add(10*time.Second), ip, 80)))...)
	}
	// generate: true: each connect raises the base rule too.
	if want := []string{"Outbound connect", "Correlated", "Outbound connect"}; !slices.Equal(got, want) {
		t.Errorf("matches = %v, want %v", got, want)
	}
}

// TestTemporal checks temporal: both rules within the timespan, in either
// order, raise a match; one alone or both too far apart do not.
func TestTemporal(t *testing.T) {
	src := baseConnect + "---\n" + `title: Shell
id: 0a000000-0000-4000-8000-000000000002
name: shell_exec
logsource:
    product: sandtrail
    category: process
detection:
    sel:
        kind: process.exec
        proc.exe|endswith: /sh
    condition: sel
---
title: Shell then connect
correlation:
    type: temporal
    rules:
        - shell_exec
        - outbound_connect
    group-by:
        - session_id
    timespan: 30s
`
	set := mustParse(t, src)
	ev := NewEvaluator(set)
	e := exec("s1", 5, 1, "/bin/sh", "sh")
	if m := ev.Observe(e); len(m) != 0 {
		t.Fatalf("shell alone raised %v", titles(m))
	}
	c := connect("s1", t0.Add(10*time.Second), "10.0.0.1", 443)
	m := ev.Observe(c)
	if len(m) != 1 || m[0].Title != "Shell then connect" || !slices.Equal(m[0].Seqs, []uint64{e.Seq, c.Seq}) {
		t.Fatalf("shell then connect: %+v", m)
	}
	ev = NewEvaluator(set)
	ev.Observe(connect("s1", t0, "10.0.0.1", 443))
	late := exec("s1", 5, 1, "/bin/sh", "sh")
	late.TS = t0.Add(31 * time.Second)
	if m := ev.Observe(late); len(m) != 0 {
		t.Errorf("31 s apart raised %v", titles(m))
	}
	ev = NewEvaluator(set)
	ev.Observe(connect("s1", t0, "10.0.0.1", 443))
	if m := ev.Observe(connect("s1", t0, "10.0.0.2", 443)); len(m) != 0 {
		t.Errorf("the same rule twice raised %v", titles(m))
	}
}

// TestCorrelationBounds checks that groups are bounded and evictions
// counted.
func TestCorrelationBounds(t *testing.T) {
	set := mustParse(t, corrRule("    type: event_count\n    rules:\n        - outbound_connect\n    group-by:\n        - net.dst_ip\n    timespan: 1h\n    condition:\n        gte: 2\n"))
	ev := NewEvaluator(set, MaxGroups(2), MaxWindow(3))
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		ev.Observe(connect("s1", t0, ip, 1))
	}
	if s := ev.Stats(); s.GroupEvictions != 1 {
		t.Errorf("GroupEvictions = %d, want 1", s.GroupEvictions)
	}
	// 10.0.0.1 was evicted: its second connect is a first again.
	if m := ev.Observe(connect("s1", t0, "10.0.0.1", 1)); len(m) != 0 {
		t.Errorf("evicted group kept its count: %v", titles(m))
	}
	// A window smaller than the condition needs is raised to it.
	set = mustParse(t, corrRule("    type: event_count\n    rules:\n        - outbound_connect\n    group-by:\n        - net.dst_ip\n    timespan: 1h\n    condition:\n        gte: 5\n"))
	ev = NewEvaluator(set, MaxWindow(3))
	for i := 0; i < 5; i++ {
		m := ev.Observe(connect("s1", t0, "10.0.0.1", 1))
		if got, want := len(m), map[bool]int{true: 1}[i == 4]; got != want {
			t.Fatalf("connect %d: %d matches, want %d", i, got, want)
		}
	}
	if s := ev.Stats(); s.WindowDrops != 0 {
		t.Errorf("WindowDrops = %d, want 0", s.WindowDrops)
	}
	// A full window drops its oldest events and counts them.
	set = mustParse(t, corrRule("    type: value_count\n    rules:\n        - outbound_connect\n    timespan: 1h\n    condition:\n        field: net.dst_port\n        gte: 2\n"))
	ev = NewEvaluator(set, MaxWindow(2))
	for i := 0; i < 5; i++ {
		if m := ev.Observe(connect("s1", t0, "10.0.0.1", 1)); len(m) != 0 {
			t.Fatalf("one port raised %v", titles(m))
		}
	}
	if s := ev.Stats(); s.WindowDrops != 3 {
		t.Errorf("WindowDrops = %d, want 3", s.WindowDrops)
	}
	if m := ev.Observe(connect("s1", t0, "10.0.0.1", 2)); len(m) != 1 || len(m[0].Seqs) != 2 {
		t.Errorf("second port: %+v, want one match of the 2 events in the window", m)
	}
}

// TestCorrelationErrors checks correlation rules that must not load.
func TestCorrelationErrors(t *testing.T) {
	tests := []struct{ name, body, msg string }{
		{"unknown rule", "    type: event_count\n    rules:\n        - nothing\n    group-by:\n        - net.dst_ip\n    timespan: 1m\n    condition:\n        gte: 2\n", `"nothing" is the id or name of no rule`},
		{"bad timespan", "    type: event_count\n    rules:\n        - outbound_connect\n    timespan: 1w\n    condition:\n        gte: 2\n", "correlation.timespan"},
		{"upper bound only", "    type: event_count\n    rules:\n        - outbound_connect\n    timespan: 1m\n    condition:\n        lt: 2\n", "needs a lower bound"},
		{"unknown criterion", "    type: event_count\n    rules:\n        - outbound_connect\n    timespan: 1m\n    condition:\n        over: 2\n", "unknown condition criterion"},
		{"value_count without field", "    type: value_count\n    rules:\n        - outbound_connect\n    timespan: 1m\n    condition:\n        gte: 2\n", "needs a field"},
		{"unknown group-by field", "    type: event_count\n    rules:\n        - outbound_connect\n    group-by:\n        - ComputerName\n    timespan: 1m\n    condition:\n        gte: 2\n", `unknown field "ComputerName"`},
		{"unsupported type", "    type: value_sum\n    rules:\n        - outbound_connect\n    timespan: 1m\n    condition:\n        field: net.bytes_out\n        gte: 2\n", `"value_sum" is not supported`},
		{"aliases", "    type: temporal\n    rules:\n        - outbound_connect\n    timespan: 1m\n    aliases:\n        ip: {}\n", "aliases are not supported"},
		{"temporal of one rule", "    type: temporal\n    rules:\n        - outbound_connect\n    timespan: 1m\n", "two or more rules"},
		{"no timespan", "    type: event_count\n    rules:\n        - outbound_connect\n    condition:\n        gte: 2\n", "correlation.timespan: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("corr.yml", []byte(corrRule(tc.body)))
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `"Correlated"`) {
				t.Errorf("Parse = %v, want an error naming the rule and containing %q", err, tc.msg)
			}
		})
	}
}
