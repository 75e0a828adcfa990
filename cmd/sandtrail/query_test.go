package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// queryCLI runs the root command and returns stdout and the error.
func queryCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

var queryT0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// queryEvents is a small record: sessions A and B, with look-alikes.
func queryEvents(from int) []*event.Event {
	mk := func(i int, sess, kind string, mod func(*event.Event)) *event.Event {
		ev := &event.Event{V: event.SchemaVersion, TS: queryT0.Add(time.Duration(from+i) * time.Second), SessionID: sess,
			Kind: kind, Source: event.SourceKernel}
		mod(ev)
		return ev
	}
	exit := int32(137)
	return []*event.Event{
		mk(0, "A", "process.exec", func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 10, Exe: "/bin/sh", Argv: []string{"sh", "-c", "echo \x1b[31mred"}}
		}),
		mk(1, "A", "file.read", func(e *event.Event) { e.File = &event.File{Op: "read", Path: "/etc/ssh/sshd_config"} }),
		mk(2, "B", "file.read", func(e *event.Event) { e.File = &event.File{Op: "read", Path: "/etc/sshd"} }),
		mk(3, "B", "net.connect", func(e *event.Event) {
			e.Net = &event.Net{Op: "connect", Proto: "tcp", Domain: "x.evil.example", DstIP: "192.0.2.7", DstPort: 443}
		}),
		mk(4, "A", "pkg.install", func(e *event.Event) {
			e.Source = event.SourceShim
			e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "lodash", Requested: "^4.17.0", Resolved: "4.17.20"}
		}),
		mk(5, "B", "session.terminate", func(e *event.Event) {
			e.Source = event.SourceSession
			e.Session = &event.Session{Op: "terminate", Reason: "oom", ExitStatus: &exit}
		}),
	}
}

// queryFixture makes a data dir whose journal holds evs.
func queryFixture(t *testing.T, data string, evs []*event.Event) {
	t.Helper()
	skeyFile := filepath.Join(data, "test.key")
	skey, err := os.ReadFile(skeyFile)
	if err != nil {
		s, _, err := journal.GenerateKey("sandtrail/query-test")
		if err != nil {
			t.Fatal(err)
		}
		skey = []byte(s)
		if err := os.WriteFile(skeyFile, skey, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	signer, err := note.NewSigner(string(skey))
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(data, "journal"), signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func sessionsOf(t *testing.T, jsonl string) []string {
	t.Helper()
	out := []string{}
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		if line == "" {
			continue
		}
		var s sessionJSON
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("sessions jsonl line %q: %v", line, err)
		}
		out = append(out, s.SessionID)
	}
	return out
}

func TestSessionsCLI(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, queryEvents(0))
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--path", "/etc/ssh"}, []string{"A"}},
		{[]string{"--path", "/etc/ssh*"}, []string{"B"}},
		{[]string{"--domain", "*.evil.example"}, []string{"B"}},
		{[]string{"--domain", "evil.example"}, []string{}},
		{[]string{"--package", "npm:lodash@^4.17.0"}, []string{"A"}},
		{[]string{"--package", "pkg:npm/lodash@4.17.21"}, []string{}},
		{[]string{"--reason", "oom"}, []string{"B"}},
		{[]string{}, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := queryCLI(t, append([]string{"--data", data, "sessions", "--format", "jsonl"}, tt.args...)...)
			if err != nil {
				t.Fatalf("sessions %v: %v", tt.args, err)
			}
			if got := sessionsOf(t, out); !slices.Equal(got, tt.want) {
				t.Errorf("sessions %v = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
	out, err := queryCLI(t, "--data", data, "sessions", "--session", "B", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ss []sessionJSON
	if err := json.Unmarshal([]byte(out), &ss); err != nil || len(ss) != 1 {
		t.Fatalf("sessions --format json = %q, %v", out, err)
	}
	if s := ss[0]; s.Events != 3 || s.File != 1 || s.Net != 1 || !s.Ended || s.EndReason != "oom" || s.ExitStatus == nil || *s.ExitStatus != 137 {
		t.Errorf("sessions --session B = %+v, want 3 events, 1 file, 1 net, ended oom 137", s)
	}
	out, err = queryCLI(t, "--data", data, "sessions")
	if err != nil || !strings.Contains(out, "SESSION") || !strings.Contains(out, "oom") {
		t.Errorf("sessions --format table = %q, %v; want a header and B's oom", out, err)
	}
}

func TestQueryCLI(t *testing.T) {
	data := t.TempDir()
	evs := queryEvents(0)
	queryFixture(t, data, evs)
	var raws []string
	if err := journal.Scan(filepath.Join(data, "journal"), 0, func(_ uint64, raw []byte) error {
		raws = append(raws, string(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// jsonl is the journal's bytes.
	out, err := queryCLI(t, "--data", data, "query", "--session", "A", "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var wantA []string
	for _, r := range raws {
		if strings.Contains(r, `"session_id":"A"`) {
			wantA = append(wantA, r)
		}
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, wantA) {
		t.Errorf("query --session A --format jsonl =\n%s\nwant\n%s", out, strings.Join(wantA, "\n"))
	}
	// json is one array.
	out, err = queryCLI(t, "--data", data, "query", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(out), &arr); err != nil || len(arr) != len(raws) {
		t.Errorf("query --format json = %d events, %v; want %d", len(arr), err, len(raws))
	}
	out, err = queryCLI(t, "--data", data, "query", "--path", "/nothing", "--format", "json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("query (no match) --format json = %q, %v; want []", out, err)
	}
	// The table summarizes, and escapes what would drive a terminal.
	out, err = queryCLI(t, "--data", data, "query")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SEQ", "npm lodash@4.17.20 (asked ^4.17.0)", "connect tcp x.evil.example 192.0.2.7:443", `echo \x1b[31mred`, "terminate reason=oom exit=137"} {
		if !strings.Contains(out, want) {
			t.Errorf("query --format table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("query --format table printed a raw escape character:\n%q", out)
	}
	// New entries in the journal show up at once: the index catches up.
	queryFixture(t, data, queryEvents(100)[:2])
	out, err = queryCLI(t, "--data", data, "query", "--session", "A", "--kind", "file.", "--format", "jsonl")
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("query after append = %q, %v; want 2 file events", out, err)
	}
}

func TestQueryCLIErrors(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, queryEvents(0))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"query", "--format", "xml"}, "--format"},
		{[]string{"query", "--since", "yesterday"}, "--since"},
		{[]string{"sessions", "--domain", "a.*.com"}, "--domain"},
		{[]string{"sessions", "--package", "lodash"}, "--package"},
		{[]string{"query", "--path", "/a", "--domain", "b.com"}, "--path and --domain"},
		{[]string{"query", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := queryCLI(t, append([]string{"--data", data}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v error = %v, want one mentioning %q", tt.args, err, tt.want)
			}
		})
	}
	empty := t.TempDir()
	for _, cmd := range []string{"query", "sessions", "reindex"} {
		if _, err := queryCLI(t, "--data", empty, cmd); err == nil || !strings.Contains(err.Error(), "no journal at") {
			t.Errorf("%s without a journal: error = %v, want one saying there is no journal", cmd, err)
		}
	}
}

func TestReindexCLI(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, queryEvents(0))
	before, err := queryCLI(t, "--data", data, "query", "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Damage the index: reindex must not need it.
	if err := os.WriteFile(filepath.Join(data, "index.db"), []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := queryCLI(t, "--data", data, "reindex")
	if err != nil || out != "" {
		t.Fatalf("reindex = %q, %v; want silence off a terminal", out, err)
	}
	after, err := queryCLI(t, "--data", data, "query", "--format", "jsonl")
	if err != nil || after != before {
		t.Errorf("query after reindex = %q, %v; want %q", after, err, before)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "index.db.rebuild-*")); len(m) != 0 {
		t.Errorf("reindex left %v behind", m)
	}
	// A journal replaced under the index: the next query rebuilds the
	// index rather than answer from the old record.
	if err := os.RemoveAll(filepath.Join(data, "journal")); err != nil {
		t.Fatal(err)
	}
	evs := queryEvents(50)
	for _, ev := range evs {
		ev.SessionID = "C" + ev.SessionID
	}
	queryFixture(t, data, evs)
	out, err = queryCLI(t, "--data", data, "sessions", "--format", "jsonl")
	if got := sessionsOf(t, out); err != nil || !slices.Equal(got, []string{"CA", "CB"}) {
		t.Errorf("sessions after the journal was replaced = %v, %v; want [CA CB]", got, err)
	}
}

// pypiEvents is a record of PyPI installs in sessions P and Q, after the
// collector.capabilities a start writes first, outside every session.
func pypiEvents() []*event.Event {
	at := func(i int) time.Time { return queryT0.Add(time.Duration(i) * time.Second) }
	install := func(i int, sess, name, version string) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: at(i), SessionID: sess, Kind: event.KindPkgInstall, Source: event.SourceShim,
			Pkg: &event.Pkg{Ecosystem: "pypi", Name: name, Requested: name, Resolved: version}}
	}
	return []*event.Event{
		{V: event.SchemaVersion, TS: at(0), Kind: event.KindCapabilities, Source: event.SourceKernel, Kernel: &event.Kernel{Release: "6.18.0"}},
		install(1, "P", "requests", "2.31.0"),
		install(2, "Q", "requests", "2.32.3"),
		install(3, "Q", "Typing_Extensions", "4.12.2"),
	}
}

// TestPackagePEP440CLI: sessions and query match PyPI's PEP 440 specifiers,
// after @ or as pip takes them, and refuse a malformed one by name.
func TestPackagePEP440CLI(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, pypiEvents())
	tests := []struct {
		spec string
		want []string
	}{
		{"pypi:requests==2.31.0", []string{"P"}},
		{"pypi:requests==2.31", []string{"P"}},
		{"pypi:requests@==2.31.0", []string{"P"}},
		{"pypi:requests!=2.31.0", []string{"Q"}},
		{"pypi:requests<2.32", []string{"P"}},
		{"pypi:requests<=2.32.3", []string{"P", "Q"}},
		{"pypi:requests>2.31.0", []string{"Q"}},
		{"pypi:requests>=2.32", []string{"Q"}},
		{"pypi:requests~=2.31.0", []string{"P"}},
		{"pypi:requests===2.32.3", []string{"Q"}},
		{"pypi:requests>=2,<3", []string{"P", "Q"}},
		{"pypi:requests>=2,!=2.32.3,<3", []string{"P"}},
		{"pypi:requests[socks]>=3", []string{}},
		{"pypi:typing-extensions==4.12.2", []string{"Q"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			out, err := queryCLI(t, "--data", data, "sessions", "--package", tt.spec, "--format", "jsonl")
			if err != nil {
				t.Fatalf("sessions --package %q: %v", tt.spec, err)
			}
			if got := sessionsOf(t, out); !slices.Equal(got, tt.want) {
				t.Errorf("sessions --package %q = %v, want %v", tt.spec, got, tt.want)
			}
			out, err = queryCLI(t, "--data", data, "query", "--package", tt.spec, "--format", "jsonl")
			if err != nil {
				t.Fatalf("query --package %q: %v", tt.spec, err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line == "" {
					continue
				}
				var ev event.Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("query jsonl line %q: %v", line, err)
				}
				if ev.Pkg == nil {
					t.Fatalf("query --package %q returned a %s event", tt.spec, ev.Kind)
				}
				got = append(got, ev.SessionID)
			}
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("query --package %q = events of %v, want %v", tt.spec, got, tt.want)
			}
		})
	}
	for _, spec := range []string{"pypi:requests=2.31.0", "pypi:requests==2.31.x", "pypi:requests>=2,<3x", "pypi:==2.31.0", "npm:lodash==4.17.20"} {
		for _, cmd := range []string{"sessions", "query"} {
			_, err := queryCLI(t, "--data", data, cmd, "--package", spec)
			if err == nil || !strings.Contains(err.Error(), "--package") || !strings.Contains(err.Error(), "pypi:requests@>=2,<3") {
				t.Errorf("%s --package %q error = %v, want one naming --package and the expected syntax", cmd, spec, err)
			}
		}
	}
}

// TestSessionsCLIHostEvents: the host's own events, which have no session,
// make no row in sessions (no empty session id), in any format.
func TestSessionsCLIHostEvents(t *testing.T) {
	data := t.TempDir()
	evs := append(pypiEvents(), &event.Event{V: event.SchemaVersion, TS: queryT0.Add(time.Minute), Kind: event.KindLoss,
		Source: event.SourceKernel, Loss: &event.Loss{Count: 2, Source: "kernel:ringbuf", HostWide: true}})
	queryFixture(t, data, evs)
	out, err := queryCLI(t, "--data", data, "sessions", "--format", "jsonl")
	if got := sessionsOf(t, out); err != nil || !slices.Equal(got, []string{"P", "Q"}) {
		t.Errorf("sessions --format jsonl = %v, %v; want [P Q]", got, err)
	}
	out, err = queryCLI(t, "--data", data, "sessions", "--kind", "collector.")
	if err != nil || !strings.HasPrefix(out, "SESSION") || strings.Count(out, "\n") != 1 {
		t.Errorf("sessions --kind collector. = %q, %v; want the header alone", out, err)
	}
	out, err = queryCLI(t, "--data", data, "query", "--kind", "collector.", "--format", "jsonl")
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("query --kind collector. = %q, %v; want the two host events", out, err)
	}
}

// TestQueryOCSF: query --format ocsf prints one OCSF event a line for the
// kinds with a class (the package fixture's processes, files, connections,
// installs and fetches), each naming its session and seq.
func TestQueryOCSF(t *testing.T) {
	data := t.TempDir()
	evs := packagesEvents()
	queryFixture(t, data, evs)
	out, err := queryCLI(t, "--data", data, "query", "--session", "P", "--format", "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	classes := map[int]int{}
	for _, l := range lines {
		var o struct {
			ClassUID int `json:"class_uid"`
			TypeUID  int `json:"type_uid"`
			Activity int `json:"activity_id"`
			Metadata struct {
				CorrelationUID string `json:"correlation_uid"`
				Sequence       uint64 `json:"sequence"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if o.Metadata.CorrelationUID != "P" || o.TypeUID != o.ClassUID*100+o.Activity {
			t.Errorf("OCSF event %s: want correlation_uid P and type_uid = class_uid*100 + activity_id", l)
		}
		classes[o.ClassUID]++
	}
	for _, c := range []int{1007, 1001, 4001, 4002, 6002} {
		if classes[c] == 0 {
			t.Errorf("no OCSF event of class %d among %v", c, classes)
		}
	}
	exported, err := queryCLI(t, "--data", data, "export", "--session", "P")
	if err != nil || exported != out {
		t.Errorf("export --session P (ocsf, the default) = %v, want what query --format ocsf printed", err)
	}
	if _, err := queryCLI(t, "--data", data, "sessions", "--format", "ocsf"); err == nil {
		t.Error("sessions --format ocsf: no error, want one (sessions have no OCSF form)")
	}
}
