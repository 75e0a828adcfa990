package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/mcpproxy/mcptest"
)

// helperEnv makes the test binary a stdio proxy: `BINARY -- SERVER ARGS…`,
// recording the calls as JSON lines to the file named by callsEnv and
// refusing the tool "secret".
const (
	helperEnv = "MCPPROXY_TEST_PROXY"
	callsEnv  = "MCPPROXY_TEST_CALLS"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runProxyHelper())
	}
	if os.Getenv(serverEnv) == "1" {
		os.Exit(runServerHelper())
	}
	os.Exit(m.Run())
}

// fileRecorder writes each call as one JSON line.
type fileRecorder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (r *fileRecorder) Record(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(c)
}

func (r *fileRecorder) Lost(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(Call{Status: "lost", Error: fmt.Sprint(n)})
}

func runProxyHelper() int {
	args := os.Args[1:]
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintln(os.Stderr, "usage: proxy -- SERVER [ARGS…]")
		return 2
	}
	f, err := os.Create(os.Getenv(callsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	o := Options{
		Refuse:   func(tool string) bool { return tool == "secret" },
		Recorder: &fileRecorder{enc: json.NewEncoder(f)},
	}
	err = Stdio(context.Background(), exec.Command(args[1], args[2:]...), os.Stdin, os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		return 1
	}
	return 0
}

// checkClient checks what the SDK client got through the proxy.
func checkClient(t *testing.T, r mcptest.Result, wantLogs bool) {
	t.Helper()
	if strings.Join(r.Tools, ",") != "echo,fail,secret" {
		t.Errorf("tools = %v, want echo, fail, secret", r.Tools)
	}
	if len(r.Echo.Content) != 1 || r.Echo.Content[0].Text != "hello" || r.Echo.IsError {
		t.Errorf("echo = %+v, want hello", r.Echo)
	}
	if !r.Fail.IsError {
		t.Errorf("fail = %+v, want isError", r.Fail)
	}
	if r.SecretError == nil || r.SecretError.Code != RefusedCode || !strings.Contains(r.SecretError.Message, `tool "secret" refused by policy`) {
		t.Errorf("secret = %s, error %+v, want the refusal (code %d)", r.Secret, r.SecretError, RefusedCode)
	}
	if wantLogs && (len(r.Logs) != 1 || r.Logs[0] != "echo hello") {
		t.Errorf("logs = %q, want the echo's notification", r.Logs)
	}
}

// readCalls reads the calls a recorder wrote as JSON lines.
func readCalls(t *testing.T, path string) []Call {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls []Call
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("call %q: %v", sc.Bytes(), err)
		}
		calls = append(calls, c)
	}
	return calls
}

// checkRecorded checks the calls recorded for the SDK client's session.
func checkRecorded(t *testing.T, calls []Call) {
	t.Helper()
	byName := map[string]Call{}
	for _, c := range calls {
		if c.Method != "tools/call" {
			t.Errorf("unexpected call %+v", c)
			continue
		}
		byName[c.Name] = c
	}
	if len(calls) != 3 {
		t.Errorf("%d calls recorded, want 3: %+v", len(calls), calls)
	}
	echo, fail, secret := byName["echo"], byName["fail"], byName["secret"]
	if echo.Status != StatusOK || string(echo.Input) != `{"text":"hello"}` || !strings.Contains(string(echo.Output), `"text":"hello"`) {
		t.Errorf("echo call = %+v, want ok with its text", echo)
	}
	if fail.Status != StatusError || !strings.Contains(string(fail.Output), `"isError":true`) {
		t.Errorf("fail call = %+v, want error", fail)
	}
	if secret.Status != StatusRefused || !strings.Contains(string(secret.Output), "-32001") {
		t.Errorf("secret call = %+v, want refused", secret)
	}
	for _, c := range []Call{echo, fail} {
		if c.Duration <= 0 || c.Start.IsZero() || c.Server != "demo-server" {
			t.Errorf("call %s: duration %v, start %v, server %q; want > 0, set, demo-server", c.Name, c.Duration, c.Start, c.Server)
		}
	}
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestStdioSDK runs the official SDK's client and server through the proxy,
// with tee on both sides of it: what crosses the proxy is unchanged but
// for the refused call, and the calls are recorded.
func TestStdioSDK(t *testing.T) {
	dir := mcptest.NodeDir(t, "", map[string]string{"tools.mjs": mcptest.ServerTools, "server.mjs": mcptest.StdioServer, "calls.mjs": mcptest.ClientCalls, "client.mjs": mcptest.StdioClient})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	inner := fmt.Sprintf("tee %s | node %s | tee %s", shQuote(f("sin")), shQuote(f("server.mjs")), shQuote(f("sout")))
	pipeline := fmt.Sprintf("tee %s | %s -- sh -c %s | tee %s", shQuote(f("cin")), shQuote(self), shQuote(inner), shQuote(f("cout")))
	serverCmd, _ := json.Marshal([]string{"sh", "-c", pipeline})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", f("client.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_SERVER_CMD="+string(serverCmd), helperEnv+"=1", callsEnv+"="+f("calls.jsonl"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, out)
	}
	var r mcptest.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client printed %q: %v", out, err)
	}
	checkClient(t, r, true)
	checkRecorded(t, readCalls(t, f("calls.jsonl")))

	read := func(name string) string {
		b, err := os.ReadFile(f(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cin, sin, sout, cout := read("cin"), read("sin"), read("sout"), read("cout")
	gone := oneLineLess(t, "client → server", cin, sin)
	if !strings.Contains(gone, `"method":"tools/call"`) || !strings.Contains(gone, `"name":"secret"`) {
		t.Errorf("the line the proxy kept from the server is %q, want the secret tools/call", gone)
	}
	added := oneLineLess(t, "server → client", cout, sout)
	if !strings.Contains(added, `"code":-32001`) || !strings.Contains(added, `tool \"secret\" refused by policy`) {
		t.Errorf("the line the proxy added for the client is %q, want the refusal", added)
	}
}

// oneLineLess checks that short is long without exactly one of its lines,
// and returns that line.
func oneLineLess(t *testing.T, what, long, short string) string {
	t.Helper()
	l, s := strings.SplitAfter(long, "\n"), strings.SplitAfter(short, "\n")
	if len(l) != len(s)+1 {
		t.Fatalf("%s: %d lines on one side, %d on the other, want one more\n%s\n---\n%s", what, len(l), len(s), long, short)
	}
	i := 0
	for i < len(s) && l[i] == s[i] {
		i++
	}
	if strings.Join(l[:i], "")+strings.Join(l[i+1:], "") != short {
		t.Fatalf("%s: the bytes differ beyond line %d:\n%s\n---\n%s", what, i, long, short)
	}
	return l[i]
}
