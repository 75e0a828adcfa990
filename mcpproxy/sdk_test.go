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
)

// The official MCP SDK that the end-to-end tests run against.
const (
	sdkPackage = "@modelcontextprotocol/sdk"
	sdkVersion = "1.32.2"
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

// sdkModules returns a node_modules holding the SDK, installed into the
// user's cache on first use. It skips when node or npm is missing, unless
// CI is set.
func sdkModules(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed for the SDK tests: %v", tool, err)
			}
			t.Skipf("%s is not installed: the tests against the official MCP SDK need node and npm", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "sandtrail-test", "mcp-sdk-"+sdkVersion)
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, sdkPackage, "package.json")); err == nil {
		return modules
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", "install", "--prefix", dir, "--no-audit", "--no-fund", sdkPackage+"@"+sdkVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", sdkPackage, sdkVersion, err, out)
	}
	return modules
}

// nodeDir writes the scripts into a new directory beside a link to the
// SDK's node_modules.
func nodeDir(t *testing.T, scripts map[string]string) string {
	t.Helper()
	modules := sdkModules(t)
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for name, src := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// serverTools registers the tools of the test server on an McpServer
// called server: echo returns its text (after a log notification), fail
// reports an error, secret must never run.
const serverTools = `
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

export function newServer() {
  const server = new McpServer({ name: 'demo-server', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('echo', { description: 'echo', inputSchema: { text: z.string() } }, async ({ text }, extra) => {
    await server.sendLoggingMessage({ level: 'info', data: 'echo ' + text }, extra.sessionId);
    return { content: [{ type: 'text', text }] };
  });
  server.registerTool('fail', { description: 'fail', inputSchema: {} }, async () =>
    ({ content: [{ type: 'text', text: 'it failed' }], isError: true }));
  server.registerTool('secret', { description: 'secret', inputSchema: {} }, async () =>
    ({ content: [{ type: 'text', text: 'the secret ran' }] }));
  return server;
}
`

const stdioServer = `
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { newServer } from './tools.mjs';
await newServer().connect(new StdioServerTransport());
`

// clientCalls runs the test's calls on a connected Client and prints them
// as JSON.
const clientCalls = `
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

export async function run(transport, done) {
  const client = new Client({ name: 'test-client', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, n => { logs.push(n.params.data); });
  await client.connect(transport);
  const out = {};
  out.tools = (await client.listTools()).tools.map(t => t.name).sort();
  out.echo = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
  out.fail = await client.callTool({ name: 'fail', arguments: {} });
  try {
    out.secret = await client.callTool({ name: 'secret', arguments: {} });
  } catch (e) {
    out.secretError = { code: e.code, message: e.message };
  }
  await client.sendRootsListChanged();
  out.logs = logs;
  if (done) await done();
  await client.close();
  console.log(JSON.stringify(out));
}
`

const stdioClient = `
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { run } from './calls.mjs';
const [command, ...args] = JSON.parse(process.env.MCP_SERVER_CMD);
await run(new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' }));
`

// clientResult is what clientCalls prints.
type clientResult struct {
	Tools []string
	Echo  struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	Fail struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	Secret      json.RawMessage
	SecretError *struct {
		Code    int
		Message string
	}
	Logs []string
}

// checkClient checks what the SDK client got through the proxy.
func checkClient(t *testing.T, r clientResult, wantLogs bool) {
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
	dir := nodeDir(t, map[string]string{"tools.mjs": serverTools, "server.mjs": stdioServer, "calls.mjs": clientCalls, "client.mjs": stdioClient})
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
	var r clientResult
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
