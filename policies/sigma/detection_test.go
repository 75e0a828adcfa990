package sigma

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestModifiers runs one selection per modifier form against events that
// must and must not match.
func TestModifiers(t *testing.T) {
	argv := func(a ...string) *event.Event { return exec("s", 10, 1, "/usr/bin/"+a[0], a...) }
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name     string
		category string // linux process_creation unless set
		sel      string // the selection's body, indented by 8 spaces
		yes, no  []*event.Event
	}{
		{name: "plain equals, case-insensitive", sel: "        Image: /usr/bin/CURL\n",
			yes: []*event.Event{argv("curl", "x")}, no: []*event.Event{argv("curlx")}},
		{name: "contains", sel: "        CommandLine|contains: ' -o /tmp'\n",
			yes: []*event.Event{argv("curl", "-O", "/TMP/x")}, no: []*event.Event{argv("curl", "-o", "/var/tmp")}},
		{name: "startswith", sel: "        CommandLine|startswith: 'sh -c'\n",
			yes: []*event.Event{argv("sh", "-c", "id")}, no: []*event.Event{argv("bash", "sh", "-c")}},
		{name: "endswith", sel: "        Image|endswith: '/sh'\n",
			yes: []*event.Event{argv("sh")}, no: []*event.Event{argv("bash"), argv("shx")}},
		{name: "list is OR", sel: "        Image|endswith:\n            - /sh\n            - /dash\n",
			yes: []*event.Event{argv("sh"), argv("dash")}, no: []*event.Event{argv("bash")}},
		{name: "all is AND", sel: "        CommandLine|contains|all:\n            - ' -e '\n            - /bin/sh\n",
			yes: []*event.Event{argv("nc", "-e", "/bin/sh", "h")}, no: []*event.Event{argv("nc", "-e", "/bin/bash"), argv("nc", "/bin/sh")}},
		{name: "wildcard star and question", sel: "        CommandLine: 'python? -c *socket*'\n",
			yes: []*event.Event{argv("python3", "-c", "import socket")}, no: []*event.Event{argv("python", "-c", "import socket"), argv("python3", "-c", "print")}},
		{name: "question mark is one character, not a byte", sel: "        CommandLine: 'echo ?'\n",
			yes: []*event.Event{argv("echo", "é")}, no: []*event.Event{argv("echo", "ab")}},
		{name: "escaped star is literal", sel: `        CommandLine: 'rm -rf \*'` + "\n",
			yes: []*event.Event{argv("rm", "-rf", "*")}, no: []*event.Event{argv("rm", "-rf", "x")}},
		{name: "escaped backslash before star is a backslash and a wildcard", sel: `        CommandLine|startswith: 'echo \\*'` + "\n",
			yes: []*event.Event{argv("echo", `\anything`)}, no: []*event.Event{argv("echo", "anything")}},
		{name: "cased", sel: "        CommandLine|contains|cased: 'EVIL'\n",
			yes: []*event.Event{argv("x", "EVIL")}, no: []*event.Event{argv("x", "evil")}},
		{name: "re, case-sensitive", sel: "        CommandLine|re: '^nc .*-e\\s+/bin/(ba)?sh'\n",
			yes: []*event.Event{argv("nc", "h", "-e", "/bin/bash")}, no: []*event.Event{argv("NC", "h", "-e", "/bin/bash"), argv("nc", "-e", "/bin/zsh")}},
		{name: "re|i", sel: "        CommandLine|re|i: '^nc .*-E'\n",
			yes: []*event.Event{argv("NC", "-e")}, no: []*event.Event{argv("ncat", "-e")}},
		{name: "exists true", category: "sandtrail/process", sel: "        proc.exe_sha256|exists: true\n",
			yes: []*event.Event{withHash(argv("ls"))}, no: []*event.Event{argv("ls")}},
		{name: "exists false", category: "sandtrail/process", sel: "        proc.exe_sha256|exists: false\n",
			yes: []*event.Event{argv("ls")}, no: []*event.Event{withHash(argv("ls"))}},
		{name: "null", category: "sandtrail/process", sel: "        proc.cwd: null\n",
			yes: []*event.Event{noCwd(argv("ls"))}, no: []*event.Event{argv("ls")}},
		{name: "base64", sel: "        CommandLine|base64|contains: 'curl http://evil'\n",
			yes: []*event.Event{argv("echo", b64([]byte("curl http://evil")))}, no: []*event.Event{argv("echo", strings.ToLower(b64([]byte("curl http://evil"))))}},
		{name: "windash", sel: "        CommandLine|windash|contains: ' -decode '\n",
			yes: []*event.Event{argv("x", "-decode", "y"), argv("x", "/decode", "y"), argv("x", "–decode", "y")}, no: []*event.Event{argv("x", "decode", "y")}},
		{name: "numeric plain", sel: "        ProcessId: 10\n",
			yes: []*event.Event{argv("ls")}, no: []*event.Event{exec("s", 11, 1, "/bin/ls", "ls")}},
		{name: "numeric wildcard matches the decimal text", sel: "        ProcessId|startswith: '1'\n",
			yes: []*event.Event{argv("ls")}, no: []*event.Event{exec("s", 21, 1, "/bin/ls", "ls")}},
		{name: "lt", sel: "        ProcessId|lt: 11\n", yes: []*event.Event{argv("ls")}, no: []*event.Event{exec("s", 11, 1, "/bin/ls", "ls")}},
		{name: "lte", sel: "        ProcessId|lte: 10\n", yes: []*event.Event{argv("ls")}, no: []*event.Event{exec("s", 11, 1, "/bin/ls", "ls")}},
		{name: "gt", sel: "        ProcessId|gt: 10\n", yes: []*event.Event{exec("s", 11, 1, "/bin/ls", "ls")}, no: []*event.Event{argv("ls")}},
		{name: "gte", sel: "        ProcessId|gte: 11\n", yes: []*event.Event{exec("s", 11, 1, "/bin/ls", "ls")}, no: []*event.Event{argv("ls")}},
		{name: "fieldref", category: "sandtrail/process", sel: "        proc.comm|fieldref: proc.exe\n",
			yes: []*event.Event{sameComm(argv("ls"))}, no: []*event.Event{argv("ls")}},
		{name: "argv list: any element", category: "sandtrail/process", sel: "        proc.argv: '--unsafe-perm'\n",
			yes: []*event.Event{argv("npm", "install", "--UNSAFE-PERM")}, no: []*event.Event{argv("npm", "install", "--unsafe-perm=false")}},
		{name: "argv list: all over elements", category: "sandtrail/process", sel: "        proc.argv|all:\n            - install\n            - '-g'\n",
			yes: []*event.Event{argv("npm", "-g", "install")}, no: []*event.Event{argv("npm", "install")}},
		{name: "bool field", category: "sandtrail/process", sel: "        proc.fileless: true\n",
			yes: []*event.Event{fileless(argv("x"))}, no: []*event.Event{argv("x")}},
		{name: "map is AND", sel: "        Image|endswith: /curl\n        CommandLine|contains: '-k'\n",
			yes: []*event.Event{argv("curl", "-k", "u")}, no: []*event.Event{argv("curl", "u"), argv("wget", "-k")}},
		{name: "list of maps is OR", sel: "        - Image|endswith: /curl\n        - CommandLine|contains: '-k'\n",
			yes: []*event.Event{argv("curl", "u"), argv("wget", "-k")}, no: []*event.Event{argv("wget", "u")}},
		{name: "empty pattern star needs the field", category: "sandtrail/process", sel: "        proc.cwd: '*'\n",
			yes: []*event.Event{argv("ls")}, no: []*event.Event{noCwd(argv("ls"))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			product, cat := "linux", "process_creation"
			if tc.category != "" {
				product, cat, _ = strings.Cut(tc.category, "/")
			}
			set := mustParse(t, ruleYAML("T", product, cat, "    sel:\n"+tc.sel+"    condition: sel\n"))
			ev := NewEvaluator(set)
			for i, e := range tc.yes {
				if got := ev.Observe(e); len(got) != 1 {
					t.Errorf("yes[%d] argv %q: %d matches, want 1", i, e.Proc.Argv, len(got))
				}
			}
			for i, e := range tc.no {
				if got := ev.Observe(e); len(got) != 0 {
					t.Errorf("no[%d] argv %q: %d matches, want 0", i, e.Proc.Argv, len(got))
				}
			}
		})
	}
}

func withHash(e *event.Event) *event.Event { e.Proc.ExeSHA256 = strings.Repeat("ab", 32); return e }
func noCwd(e *event.Event) *event.Event    { e.Proc.Cwd = ""; return e }
func fileless(e *event.Event) *event.Event { e.Proc.Fileless = true; return e }
func sameComm(e *event.Event) *event.Event { e.Proc.Comm = strings.ToUpper(e.Proc.Exe); return e }

// TestBase64Offset checks that every offset variant finds the value inside
// a longer base64 text, whatever the bytes around it.
func TestBase64Offset(t *testing.T) {
	set := mustParse(t, ruleYAML("T", "linux", "process_creation",
		"    sel:\n        CommandLine|base64offset|contains: 'http://evil.example'\n    condition: sel\n"))
	ev := NewEvaluator(set)
	for pre := 0; pre < 6; pre++ {
		for post := 0; post < 4; post++ {
			plain := strings.Repeat("A", pre) + "http://evil.example" + strings.Repeat("z", post)
			enc := base64.StdEncoding.EncodeToString([]byte(plain))
			if got := ev.Observe(exec("s", 1, 0, "/bin/echo", "echo", enc)); len(got) != 1 {
				t.Errorf("base64(%q) = %s: %d matches, want 1", plain, enc, len(got))
			}
		}
	}
	clean := base64.StdEncoding.EncodeToString([]byte("AAAhttp://good.example"))
	if got := ev.Observe(exec("s", 1, 0, "/bin/echo", "echo", clean)); len(got) != 0 {
		t.Errorf("base64 of another URL matched")
	}
}

// TestCIDR checks the cidr modifier over v4, v6 and v4-mapped addresses.
func TestCIDR(t *testing.T) {
	set := mustParse(t, ruleYAML("T", "linux", "network_connection",
		"    sel:\n        DestinationIp|cidr:\n            - 10.0.0.0/8\n            - 'fd00::/8'\n    condition: sel\n"))
	ev := NewEvaluator(set)
	for _, ip := range []string{"10.1.2.3", "fd12::1", "::ffff:10.9.9.9"} {
		if got := ev.Observe(connect("s", t0, ip, 443)); len(got) != 1 {
			t.Errorf("DestinationIp %s: %d matches, want 1", ip, len(got))
		}
	}
	for _, ip := range []string{"11.0.0.1", "fe80::1", "not-an-ip"} {
		if got := ev.Observe(connect("s", t0, ip, 443)); len(got) != 0 {
			t.Errorf("DestinationIp %s: %d matches, want 0", ip, len(got))
		}
	}
}

// TestConditions checks each condition form against every combination of
// selections sel_a, sel_b, filter_x and _hidden, each true when argv holds
// its letter.
func TestConditions(t *testing.T) {
	det := "    sel_a:\n        proc.argv: a\n    sel_b:\n        proc.argv: b\n    filter_x:\n        proc.argv: x\n    _hidden:\n        proc.argv: h\n"
	tests := []struct {
		cond string
		want func(a, b, x, h bool) bool
	}{
		{"sel_a", func(a, b, x, h bool) bool { return a }},
		{"sel_a and sel_b", func(a, b, x, h bool) bool { return a && b }},
		{"sel_a or sel_b", func(a, b, x, h bool) bool { return a || b }},
		{"not sel_a", func(a, b, x, h bool) bool { return !a }},
		{"sel_a and not filter_x", func(a, b, x, h bool) bool { return a && !x }},
		{"sel_a or sel_b and filter_x", func(a, b, x, h bool) bool { return a || (b && x) }},
		{"(sel_a or sel_b) and filter_x", func(a, b, x, h bool) bool { return (a || b) && x }},
		{"not (sel_a or sel_b)", func(a, b, x, h bool) bool { return !(a || b) }},
		{"not not sel_a", func(a, b, x, h bool) bool { return a }},
		{"1 of sel_*", func(a, b, x, h bool) bool { return a || b }},
		{"all of sel_*", func(a, b, x, h bool) bool { return a && b }},
		{"1 of sel_* and not 1 of filter*", func(a, b, x, h bool) bool { return (a || b) && !x }},
		{"1 of them", func(a, b, x, h bool) bool { return a || b || x }},
		{"all of them", func(a, b, x, h bool) bool { return a && b && x }},
		{"2 of them", func(a, b, x, h bool) bool { return n(a, b, x) >= 2 }},
		{"3 of them", func(a, b, x, h bool) bool { return a && b && x }},
		{"_hidden and 1 of them", func(a, b, x, h bool) bool { return h && (a || b || x) }},
		{"all of sel* or _hidden", func(a, b, x, h bool) bool { return (a && b) || h }},
		{"sel_a AND NOT sel_b", func(a, b, x, h bool) bool { return a && !b }},
	}
	for _, tc := range tests {
		t.Run(tc.cond, func(t *testing.T) {
			set := mustParse(t, ruleYAML("T", "sandtrail", "process", det+"    condition: '"+tc.cond+"'\n"))
			ev := NewEvaluator(set)
			for mask := 0; mask < 16; mask++ {
				a, b, x, h := mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0
				args := []string{"prog"}
				for i, l := range []string{"a", "b", "x", "h"} {
					if mask&(1<<i) != 0 {
						args = append(args, l)
					}
				}
				got := len(ev.Observe(exec("s", 5, 1, "/bin/prog", args...))) == 1
				if want := tc.want(a, b, x, h); got != want {
					t.Errorf("argv %v: matched = %v, want %v", args, got, want)
				}
			}
		})
	}
	t.Run("condition list is OR", func(t *testing.T) {
		set := mustParse(t, ruleYAML("T", "sandtrail", "process", det+"    condition:\n        - sel_a and sel_b\n        - filter_x\n"))
		ev := NewEvaluator(set)
		for _, tc := range []struct {
			args []string
			want int
		}{{[]string{"p", "a", "b"}, 1}, {[]string{"p", "x"}, 1}, {[]string{"p", "a"}, 0}} {
			if got := len(ev.Observe(exec("s", 5, 1, "/bin/p", tc.args...))); got != tc.want {
				t.Errorf("argv %v: %d matches, want %d", tc.args, got, tc.want)
			}
		}
	})
}

func n(bs ...bool) int {
	c := 0
	for _, b := range bs {
		if b {
			c++
		}
	}
	return c
}

// TestCategoryIndex checks that an event meets only its category's rules:
// a file event whose process has a matching argv does not raise a
// process rule, and a kind the schema does not list yet meets the rules of
// its prefix.
func TestCategoryIndex(t *testing.T) {
	set := mustParse(t, ruleYAML("Proc", "sandtrail", "process", "    sel:\n        proc.argv: secret\n    condition: sel\n")+
		"---\n"+ruleYAML("File", "sandtrail", "file", "    sel:\n        file.path|endswith: /secret\n    condition: sel\n")+
		"---\n"+ruleYAML("LinuxFile", "linux", "file_event", "    sel:\n        TargetFilename|endswith: /secret\n    condition: sel\n"))
	ev := NewEvaluator(set)
	e := fileEv("s", event.KindFileWrite, "write", "/home/agent/secret")
	e.Proc.Argv = []string{"cp", "secret"}
	if got := titles(ev.Observe(e)); !slices.Equal(got, []string{"File", "LinuxFile"}) {
		t.Errorf("file.write: %v, want [File LinuxFile]", got)
	}
	e = fileEv("s", event.KindFileRead, "read", "/home/agent/secret")
	if got := titles(ev.Observe(e)); !slices.Equal(got, []string{"File"}) {
		t.Errorf("file.read: %v, want [File] (file_event is creation and writes)", got)
	}
	e = fileEv("s", "file.future_op", "future_op", "/x/secret")
	if got := titles(ev.Observe(e)); !slices.Equal(got, []string{"File"}) {
		t.Errorf("file.future_op: %v, want [File]", got)
	}
	r := fileEv("s", event.KindFileRename, "rename", "/tmp/a")
	r.File.NewPath = "/home/agent/secret"
	if got := titles(ev.Observe(r)); !slices.Equal(got, []string{"LinuxFile"}) {
		t.Errorf("file.rename to secret: %v, want [LinuxFile] (TargetFilename is the new name)", got)
	}
}

// TestSandtrailFields exercises fields of each sandtrail category.
func TestSandtrailFields(t *testing.T) {
	tests := []struct {
		cat, sel string
		e        *event.Event
		want     bool
	}{
		{"dns", "net.dns.query|endswith: .evil.example", dnsEv("a.EVIL.example", "1.2.3.4"), true},
		{"dns", "net.dns.answers.data|cidr: 1.2.3.0/24", dnsEv("x.example", "1.2.3.4"), true},
		{"dns", "net.dns.answers.data|cidr: 1.2.4.0/24", dnsEv("x.example", "1.2.3.4"), false},
		{"network", "net.dst_port: 4444", connect("s", t0, "10.0.0.1", 4444), true},
		{"network", "net.dst_port: 443", connect("s", t0, "10.0.0.1", 4444), false},
		{"package", "pkg.install_scripts: postinstall", pkgEv(), true},
		{"package", "pkg.verified: false", pkgEv(), true},
		{"package", "pkg.name|startswith: lodash", pkgEv(), false},
		{"session", "session.op: start", &event.Event{Kind: event.KindSessionStart, Session: &event.Session{Op: "start"}}, true},
		{"limit", "limit.measured|gt: 100", &event.Event{Kind: event.KindLimitHit, Limit: &event.Limit{Type: "pids", Measured: 101}}, true},
		{"tool", "tool.name: Bash", &event.Event{Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "bash"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.cat+" "+tc.sel, func(t *testing.T) {
			set := mustParse(t, ruleYAML("T", "sandtrail", tc.cat, "    sel:\n        "+tc.sel+"\n    condition: sel\n"))
			if got := len(NewEvaluator(set).Observe(tc.e)) == 1; got != tc.want {
				t.Errorf("matched = %v, want %v", got, tc.want)
			}
		})
	}
}

func dnsEv(q, answer string) *event.Event {
	return &event.Event{Kind: event.KindNetDNS, SessionID: "s", Net: &event.Net{Op: "dns",
		DNS: &event.DNS{Query: q, QType: "A", Answers: []event.DNSAnswer{{Type: "A", Data: answer, TTL: 60}}}}}
}

func pkgEv() *event.Event {
	return &event.Event{Kind: event.KindPkgFetch, SessionID: "s", Pkg: &event.Pkg{Ecosystem: "npm", Name: "left-pad",
		Verified: event.Bool(false), InstallScripts: []string{"preinstall", "postinstall"}}}
}

// TestLinuxFields checks the SigmaHQ field mapping of a process.exec.
func TestLinuxFields(t *testing.T) {
	e := exec("s", 42, 7, "/usr/bin/python3.11", "python3", "-c", "print(1)")
	e.Proc.Exe = "python3"
	e.Proc.UID = event.U32(0)
	noPath := exec("s", 43, 7, "", "x")
	noPath.Proc.Exe, noPath.Proc.UID = "./x", event.U32(1001)
	tests := []struct {
		sel  string
		e    *event.Event
		want bool
	}{
		{"Image: /usr/bin/python3.11", e, true},
		{"Image: ./x", noPath, true},
		{"CommandLine: python3 -c print(1)", e, true},
		{"CurrentDirectory: /home/agent", e, true},
		{"User: root", e, true},
		{"User: '1001'", noPath, true},
		{"ProcessId: 42", e, true},
		{"ParentProcessId: 7", e, true},
	}
	for _, tc := range tests {
		t.Run(tc.sel, func(t *testing.T) {
			set := mustParse(t, ruleYAML("T", "linux", "process_creation", "    sel:\n        "+tc.sel+"\n    condition: sel\n"))
			if got := len(NewEvaluator(set).Observe(tc.e)) == 1; got != tc.want {
				t.Errorf("matched = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("Users names a uid", func(t *testing.T) {
		set := mustParse(t, ruleYAML("T", "linux", "process_creation", "    sel:\n        User: agent\n    condition: sel\n"))
		if got := len(NewEvaluator(set, Users(map[uint32]string{1001: "agent"})).Observe(noPath)); got != 1 {
			t.Errorf("User agent: %d matches, want 1", got)
		}
		if got := len(NewEvaluator(set).Observe(noPath)); got != 0 {
			t.Errorf("User agent without Users: %d matches, want 0", got)
		}
	})
}
