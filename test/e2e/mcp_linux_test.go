package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/sandtrail/sandtrail/mcpproxy/mcptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// TestMCPProxy runs the official MCP SDK's client inside a session, with
// its stdio server behind `sandtrail mcp-proxy`, on the daemon that
// `sandtrail run` hosts: each tools/call is journaled in the session from
// the proxy (source shim), kept as the policy's tool_io says (echo in full,
// sealed; the rest as summaries), the refused tool never reaches the
// server and the client gets the JSON-RPC error, and an investigator's
// unseal reveals echo's whole I/O, itself journaled.
func TestMCPProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := mcptest.NodeDir(t, e.data, map[string]string{"tools.mjs": mcptest.ServerTools, "server.mjs": mcptest.StdioServer,
		"calls.mjs": mcptest.ClientCalls, "client.mjs": mcptest.StdioClient})
	inv, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "ir.key")
	if err := os.WriteFile(key, []byte(inv.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := writePolicy(t, `agent_uid0: allow
tool_io:
  verbosity: summaries
  tools: [{match: echo, verbosity: full}]
  recipients: [`+inv.Recipient().String()+`]
  refuse: [secret]
`)
	apiSock := filepath.Join(filepath.Dir(e.sock), "api.sock")
	server, _ := json.Marshal([]string{bin, "mcp-proxy", "--api-socket", apiSock, "--", "node", filepath.Join(dir, "server.mjs")})
	examples, err := filepath.Abs("../../docs/examples")
	if err != nil {
		t.Fatal(err)
	}
	// The MCP client, then docs/agents.md's own clients of the tool API.
	script := "cd " + dir + " && MCP_SERVER_CMD='" + string(server) + "' node client.mjs && export SANDTRAIL_API_SOCKET=" + apiSock +
		" && node " + examples + "/tool-events.mjs >/dev/null && python3 " + examples + "/tool_events.py >/dev/null"
	r := e.run("--user", "root", "--policy", pol, "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var got mcptest.Result
	if err := json.Unmarshal([]byte(r.stdout[strings.Index(r.stdout, "{"):]), &got); err != nil {
		t.Fatalf("the client printed %q: %v", r.stdout, err)
	}
	if len(got.Echo.Content) != 1 || got.Echo.Content[0].Text != "hello" || !got.Fail.IsError || got.SecretError == nil || got.SecretError.Code != -32001 {
		t.Fatalf("the client got %+v through the proxy, want echo, fail's error and the refusal of secret", got)
	}

	evs := e.events(r.summary.SessionID)
	calls := map[string]*event.Event{}
	for _, ev := range kinds(evs, event.KindToolInvoke) {
		calls[ev.Tool.Name] = ev
	}
	// The example clients, from inside the session: their session's own
	// events, at the policy's default verbosity.
	if b := calls["bash"]; b == nil || b.Source != event.SourceShim || b.Tool.Verbosity != "summaries" || !strings.Contains(b.Tool.InputSummary, "npm install lodash") {
		t.Errorf("the Node example's tool.invoke: %+v, want it journaled in the session with summaries", b)
	}
	if ms := kinds(evs, event.KindModelIO); len(ms) != 1 || ms[0].Model.Name != "claude-sonnet-4" || ms[0].Model.Verbosity != "summaries" || ms[0].Model.InputSHA256 == "" {
		t.Errorf("the Python example's model.io events: %v, want one, with summaries", ms)
	}
	echo, fail, secret := calls["echo"], calls["fail"], calls["secret"]
	if echo == nil || fail == nil || secret == nil {
		t.Fatalf("tool.invoke events %v, want echo, fail and secret", calls)
	}
	for _, ev := range []*event.Event{echo, fail, secret} {
		if ev.Source != event.SourceShim || ev.Tool.Server != "demo-server" || ev.Tool.Method != "tools/call" || ev.Proc == nil || ev.Proc.Pid == 0 {
			t.Errorf("%s: %+v, want the proxy's account (source shim, server demo-server, tools/call, its pid)", ev.Tool.Name, ev)
		}
	}
	if echo.Tool.Status != "ok" || echo.Tool.Verbosity != "full" || !strings.HasPrefix(echo.Tool.SealedRef, "sha256:") || !strings.Contains(echo.Tool.InputSummary, "hello") {
		t.Errorf("echo: %+v, want ok, kept in full with a sealed blob", echo.Tool)
	}
	if fail.Tool.Status != "error" || fail.Tool.Verbosity != "summaries" || fail.Tool.SealedRef != "" || fail.Tool.OutputSHA256 == "" {
		t.Errorf("fail: %+v, want error, kept as summaries", fail.Tool)
	}
	if secret.Tool.Status != "refused" || !strings.Contains(secret.Tool.Error, "refused by policy") {
		t.Errorf("secret: %+v, want refused", secret.Tool)
	}
	e.verify()

	out, err := e.cmd("investigate", "unseal", "--identity", key, "--session", r.summary.SessionID, "--reason", "e2e", "--format", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"name": "echo"`) || !strings.Contains(string(out), `hello`) {
		t.Fatalf("investigate unseal: %v\n%s\nwant echo's whole I/O", err, out)
	}
	var unsealed []*event.Event
	for _, ev := range kinds(e.events(""), event.KindInvestigateUnseal) {
		unsealed = append(unsealed, ev)
	}
	if len(unsealed) != 1 || unsealed[0].Investigate.Session != r.summary.SessionID || unsealed[0].Investigate.Reason != "e2e" {
		t.Errorf("investigate.unseal events %+v, want the one unseal", unsealed)
	}
}

// TestMCPProxyHTTP runs the official SDK's streamable-HTTP server and
// client inside a session with `sandtrail mcp-proxy --listen` between
// them: the calls are journaled from the proxy and the refused tool gets
// the JSON-RPC error.
func TestMCPProxyHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := mcptest.NodeDir(t, e.data, map[string]string{"tools.mjs": mcptest.ServerTools, "server.mjs": mcptest.HTTPServer,
		"calls.mjs": mcptest.ClientCalls, "client.mjs": mcptest.HTTPClient})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := ln.Addr().String()
	ln.Close()
	pol := writePolicy(t, "agent_uid0: allow\ntool_io: {verbosity: summaries, refuse: [secret]}\n")
	apiSock := filepath.Join(filepath.Dir(e.sock), "api.sock")
	// The server prints its port; the proxy is up once its port answers.
	script := `set -e; cd ` + dir + `
node server.mjs sse > port & server=$!
while [ ! -s port ]; do sleep 0.05; done
` + bin + ` mcp-proxy --api-socket ` + apiSock + ` --listen ` + proxyAddr + ` --upstream "http://127.0.0.1:$(cat port)/mcp" & proxy=$!
for i in $(seq 100); do node -e "require('net').connect(` + strings.ReplaceAll(proxyAddr, "127.0.0.1:", "") + `,'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))" && break; sleep 0.1; done
MCP_URL="http://` + proxyAddr + `/mcp" node client.mjs
kill $proxy $server; wait $proxy || true`
	r := e.run("--user", "root", "--policy", pol, "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var got mcptest.Result
	if i := strings.Index(r.stdout, "{"); i < 0 || json.Unmarshal([]byte(r.stdout[i:]), &got) != nil {
		t.Fatalf("the client printed %q", r.stdout)
	}
	if len(got.Echo.Content) != 1 || got.Echo.Content[0].Text != "hello" || got.SecretError == nil || got.SecretError.Code != -32001 {
		t.Fatalf("the client got %+v through the HTTP proxy", got)
	}
	calls := map[string]string{}
	for _, ev := range kinds(e.events(r.summary.SessionID), event.KindToolInvoke) {
		if ev.Source == event.SourceShim && ev.Tool.Method == "tools/call" {
			calls[ev.Tool.Name] = ev.Tool.Status
		}
	}
	if calls["echo"] != "ok" || calls["fail"] != "error" || calls["secret"] != "refused" {
		t.Errorf("journaled tools/call statuses %v, want echo ok, fail error, secret refused", calls)
	}
}
