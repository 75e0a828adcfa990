package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// journalBackend is a Backend over a real journal: posts are appended as
// they come, facts are the sessions registered.
type journalBackend struct {
	j     *journal.Journal
	dir   string
	known map[string]bool
}

func (b *journalBackend) Record(ctx context.Context, e *event.Event, in, out *string) (string, error) {
	if in != nil && e.Tool != nil {
		e.Tool.InputBytes = int64(len(*in))
	}
	return "", b.j.Append(ctx, e)
}

func (b *journalBackend) Facts(_ context.Context, id string) (*api.Facts, error) {
	if !b.known[id] {
		return nil, api.ErrNoSession
	}
	return &api.Facts{ID: id, Live: true}, nil
}

func (b *journalBackend) Scan(_ context.Context, from uint64, fn func(uint64, []byte) error) error {
	return journal.Scan(b.dir, from, fn)
}

func (b *journalBackend) Size() uint64 { return b.j.Size() }

func (b *journalBackend) ToolPolicy() api.ToolPolicy {
	return api.ToolPolicy{Refuse: []string{"shell_*"}}
}

// fixture is an API server on a unix socket (and a loopback TCP listener
// with tokens) over a journal, attributing by two real session cgroups.
type fixture struct {
	b          *journalBackend
	sock, addr string
	inA, inB   func(uid int) *exec.Cmd
	tokens     string
}

func newFixture(t *testing.T) *fixture {
	base := cgrouptest.New(t)
	cgA, cgB := base.Child(t, "A"), base.Child(t, "B")
	table := server.NewTable()
	table.Register(cgA.ID, "sess-A")
	table.Register(cgB.ID, "sess-B")
	j, dir := journaltest.Open(t)
	b := &journalBackend{j: j, dir: dir, known: map[string]bool{"sess-A": true, "sess-B": true}}
	// A directory every uid can reach: the refusal of uid nobody is the
	// server's, not the file system's.
	tmp, err := os.MkdirTemp("", "sandtrail-api-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{b: b, sock: filepath.Join(tmp, "api.sock"), tokens: filepath.Join(tmp, "tokens")}
	srv := api.New(b, attribution.New(table, attribution.WithMount(base.Mount())), api.NewTokenFile(f.tokens), nil)
	ln, err := server.Listen(f.sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = tcp.Addr().String()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.ServeUnix(ln) }()
	go func() { defer wg.Done(); _ = srv.ServeTCP(tcp, nil) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		wg.Wait()
	})
	in := func(cg *cgrouptest.Cgroup) func(int) *exec.Cmd {
		return func(uid int) *exec.Cmd {
			cmd := exec.Command("true")
			cmd.SysProcAttr = cg.SysProcAttr(t, uid)
			return cmd
		}
	}
	f.inA, f.inB = in(cgA), in(cgB)
	return f
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	if p := "/usr/bin/" + name; fileExists(p) {
		// The system's, which every uid may run (not a per-user shim).
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (make deps installs it): %v", name, err)
		}
		t.Skipf("skipping: no %s", name)
	}
	return p
}

// client runs a docs/examples client with cmd's process attributes.
func (f *fixture) client(t *testing.T, cmd *exec.Cmd, session string, argv ...string) (string, error) {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = cmd.SysProcAttr
	c.Env = append(os.Environ(), "SANDTRAIL_API_SOCKET="+f.sock, "SANDTRAIL_SESSION="+session)
	out, err := c.CombinedOutput()
	return string(out), err
}

// events are the journal's events of session.
func (f *fixture) events(t *testing.T, session string) []*event.Event {
	t.Helper()
	var out []*event.Event
	if err := f.b.Scan(context.Background(), 0, func(seq uint64, raw []byte) error {
		e, err := event.DecodeStored(raw)
		if err != nil {
			return err
		}
		if e.SessionID == session {
			e.Seq = seq
			out = append(out, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// TestExampleClients runs the Node and Python clients of docs/examples, as
// real processes in real session cgroups and as root outside them.
func TestExampleClients(t *testing.T) {
	node, python := requireTool(t, "node"), requireTool(t, "python3")
	f := newFixture(t)
	nodeClient := []string{node, "../../docs/examples/tool-events.mjs"}
	pyClient := []string{python, "../../docs/examples/tool_events.py"}

	t.Run("node in session A posts to its own session", func(t *testing.T) {
		out, err := f.client(t, f.inA(-1), "self", nodeClient...)
		if err != nil {
			t.Fatalf("node client: %v\n%s", err, out)
		}
		var p api.Posted
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &p); err != nil || p.EventID == "" {
			t.Fatalf("node client printed %q (%v), want the Posted reply", out, err)
		}
		evs := f.events(t, "sess-A")
		if len(evs) != 1 || evs[0].Kind != event.KindToolInvoke || evs[0].Source != event.SourceShim || evs[0].Tool.Name != "bash" ||
			evs[0].Proc == nil || evs[0].Proc.Pid == 0 || evs[0].EventID != p.EventID || evs[0].Seq != p.Seq {
			t.Fatalf("session A's journaled events = %s, want the node client's tool.invoke, source shim, with its pid", dump(evs))
		}
		if evs[0].Tool.InputBytes == 0 {
			t.Errorf("the whole input did not reach the backend")
		}
	})
	t.Run("python as root outside every session names session B", func(t *testing.T) {
		out, err := f.client(t, exec.Command("true"), "sess-B", pyClient...)
		if err != nil {
			t.Fatalf("python client: %v\n%s", err, out)
		}
		evs := f.events(t, "sess-B")
		if len(evs) != 1 || evs[0].Kind != event.KindModelIO || evs[0].Source != event.SourceAPI || evs[0].Model.Name != "claude-sonnet-4" {
			t.Fatalf("session B's journaled events = %s, want the python client's model.io, source api", dump(evs))
		}
	})
	t.Run("a caller in session A is refused session B", func(t *testing.T) {
		for _, c := range [][]string{nodeClient, pyClient} {
			out, err := f.client(t, f.inA(-1), "sess-B", c...)
			if err == nil || !strings.Contains(out, "403") || !strings.Contains(out, "may not reach session sess-B") {
				t.Errorf("%s from session A to B: %v\n%s\nwant a 403 refusal", filepath.Base(c[1]), err, out)
			}
		}
		if n := len(f.events(t, "sess-B")); n != 1 {
			t.Errorf("session B has %d events after A's attempts, want 1", n)
		}
	})
	t.Run("uid nobody outside every session is refused", func(t *testing.T) {
		cmd := exec.Command("true")
		cmd.SysProcAttr = f.inA(65534).SysProcAttr
		cmd.SysProcAttr.UseCgroupFD = false
		out, err := f.client(t, cmd, "sess-A", pyClient...)
		if err == nil || !strings.Contains(out, "403") {
			t.Errorf("nobody outside sessions: %v\n%s\nwant a 403", err, out)
		}
	})
	t.Run("the event stream is root's", func(t *testing.T) {
		resp, err := unixClient(f.sock).Get("http://api/v1/sessions/sess-A/events?since=0")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			e, err := event.Unmarshal(sc.Bytes())
			if err != nil || e.SessionID != "sess-A" {
				t.Errorf("stream line %q: %v", sc.Text(), err)
			}
			n++
		}
		if resp.StatusCode != 200 || n != 1 {
			t.Errorf("GET events as root: %d, %d lines; want 200 and session A's one event", resp.StatusCode, n)
		}
		out, err := f.client(t, f.inA(-1), "", requireTool(t, "python3"), "-c", `
import http.client, socket, os, sys
c = http.client.HTTPConnection("x")
c.sock = socket.socket(socket.AF_UNIX); c.sock.connect(os.environ["SANDTRAIL_API_SOCKET"])
for p in ("/v1/sessions/self/events", "/v1/sessions/self", "/v1/policy/tools"):
    c.request("GET", p); r = c.getresponse(); print(p, r.status, r.read().decode().strip())
`)
		if err != nil || !strings.Contains(out, "/v1/sessions/self/events 403") || !strings.Contains(out, `/v1/sessions/self 200 {"id":"sess-A"`) ||
			!strings.Contains(out, `/v1/policy/tools 200 {"refuse":["shell_*"]}`) {
			t.Errorf("GETs from session A: %v\n%s\nwant the stream refused, its own facts and the tool policy served", err, out)
		}
	})
}

// TestTokens checks the TCP listener's bearer tokens and their scopes.
func TestTokens(t *testing.T) {
	f := newFixture(t)
	tokB, lineB, err := api.NewToken("sess-B", "orchestrator b")
	if err != nil {
		t.Fatal(err)
	}
	tokAll, lineAll, _ := api.NewToken(api.ScopeAny, "investigator")
	if err := os.WriteFile(f.tokens, []byte("# tokens\n"+lineB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+f.addr+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	post := `{"kind":"tool.invoke","tool":{"name":"read_file","status":"ok"},"input":"{}"}`
	if code, body := do("POST", "/v1/sessions/sess-B/events", "", post); code != 401 {
		t.Errorf("no token: %d %s, want 401", code, body)
	}
	if code, body := do("POST", "/v1/sessions/sess-B/events", "stk_wrong", post); code != 401 {
		t.Errorf("unknown token: %d %s, want 401", code, body)
	}
	if code, body := do("POST", "/v1/sessions/sess-B/events", tokB, post); code != 201 {
		t.Errorf("session B's token to B: %d %s, want 201", code, body)
	}
	cl, err := api.NewTCPClient("http://"+f.addr, tokB)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cl.Post(context.Background(), "sess-B", &api.Post{Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "grep", Status: "ok"}}); err != nil || p.Seq == 0 {
		t.Errorf("Client.Post with session B's token = %+v, %v", p, err)
	}
	if _, err := cl.Post(context.Background(), "sess-A", &api.Post{Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "grep"}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("Client.Post to A with B's token = %v, want the 403 named", err)
	}
	if code, body := do("POST", "/v1/sessions/sess-A/events", tokB, post); code != 403 {
		t.Errorf("session B's token to A: %d %s, want 403", code, body)
	}
	if code, body := do("GET", "/v1/sessions/sess-B/events", tokB, ""); code != 403 {
		t.Errorf("session B's token reading the stream: %d %s, want 403", code, body)
	}
	if code, _ := do("GET", "/v1/sessions/sess-B/events", tokAll, ""); code != 401 {
		t.Errorf("a token not yet in the file: %d, want 401", code)
	}
	// Added to the file, it counts without a restart.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(f.tokens, []byte(lineB+"\n"+lineAll+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := do("GET", "/v1/sessions/sess-B/events", tokAll, ""); code != 200 || !strings.Contains(body, `"read_file"`) {
		t.Errorf("the investigator's token reading B: %d %s, want 200 and B's event", code, body)
	}
	// A caller inside session A is held to A over loopback, whatever its
	// token: B's token is refused there, and the "*" token reaches A only.
	script := `
import os, sys, urllib.request
def go(path, tok, body=None):
    req = urllib.request.Request("http://" + os.environ["ADDR"] + path, data=body, headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        print(path, urllib.request.urlopen(req).status)
    except urllib.error.HTTPError as e:
        print(path, e.code)
body = b'{"kind":"tool.invoke","tool":{"name":"x"}}'
go("/v1/sessions/sess-B/events", os.environ["TOKB"], body)
go("/v1/sessions/sess-B/events", os.environ["TOKALL"], body)
go("/v1/sessions/sess-A/events", os.environ["TOKALL"], body)
go("/v1/sessions/sess-A/events", os.environ["TOKALL"])
`
	c := exec.Command(requireTool(t, "python3"), "-c", script)
	c.SysProcAttr = f.inA(-1).SysProcAttr
	c.Env = append(os.Environ(), "ADDR="+f.addr, "TOKB="+tokB, "TOKALL="+tokAll)
	out, err := c.CombinedOutput()
	want := "/v1/sessions/sess-B/events 403\n/v1/sessions/sess-B/events 403\n/v1/sessions/sess-A/events 201\n/v1/sessions/sess-A/events 403\n"
	if err != nil || string(out) != want {
		t.Errorf("tokens used from inside session A over loopback: %v\n%s\nwant\n%s", err, out, want)
	}
	if err := os.Chmod(f.tokens, 0o666); err != nil {
		t.Fatal(err)
	}
	if code, _ := do("POST", "/v1/sessions/sess-B/events", tokB, post); code != 401 {
		t.Errorf("a tokens file writable by others: %d, want every token refused", code)
	}
}

// TestPostErrors checks that bad posts get a clear 4xx and journal nothing.
func TestPostErrors(t *testing.T) {
	f := newFixture(t)
	c := unixClient(f.sock)
	for _, tt := range []struct{ path, body, want string }{
		{"/v1/sessions/sess-A/events", `{"kind":"pkg.install"}`, "the API takes tool.invoke and model.io"},
		{"/v1/sessions/sess-A/events", `{"kind":"tool.invoke"}`, "tool.invoke needs tool"},
		{"/v1/sessions/sess-A/events", `{"kind":"tool.invoke","tool":{"name":"x","status":"fine"}}`, `tool.status "fine"`},
		{"/v1/sessions/sess-A/events", `{"kind":"tool.invoke","tool":{"name":"x"},"evil":1}`, "unknown field"},
		{"/v1/sessions/sess-A/events", `{"kind":"tool.invoke","tool":{"name":"x"}} {}`, "more than one JSON value"},
		{"/v1/sessions/self/events", `{"kind":"tool.invoke","tool":{"name":"x"}}`, "in no session"},
		{"/v1/sessions/..%2f/events", `{"kind":"tool.invoke","tool":{"name":"x"}}`, "session id"},
		{"/v1/nothing", ``, "no such endpoint"},
	} {
		resp, err := c.Post("http://api"+tt.path, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || !strings.Contains(e.Error, tt.want) {
			t.Errorf("POST %s %s: %d %q, want a 4xx saying %q", tt.path, tt.body, resp.StatusCode, e.Error, tt.want)
		}
	}
	if n := f.b.Size(); n != 0 {
		t.Errorf("bad posts journaled %d events", n)
	}
	big := `{"kind":"tool.invoke","tool":{"name":"x"},"input":"` + strings.Repeat("a", api.MaxBody) + `"}`
	resp, err := c.Post("http://api/v1/sessions/sess-A/events", "application/json", strings.NewReader(big))
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "broken pipe") && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over MaxBody: %d, want 413", resp.StatusCode)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func dump(evs []*event.Event) string {
	b, _ := json.Marshal(evs)
	return string(b)
}
