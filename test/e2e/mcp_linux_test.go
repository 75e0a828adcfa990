package e2e

import (
	"encoding/json"
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
	server, _ := json.Marshal([]string{bin, "mcp-proxy", "--api-socket", filepath.Join(filepath.Dir(e.sock), "api.sock"), "--", "node", filepath.Join(dir, "server.mjs")})
	script := "cd " + dir + " && MCP_SERVER_CMD='" + string(server) + "' node client.mjs"
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

	calls := map[string]*event.Event{}
	for _, ev := range kinds(e.events(r.summary.SessionID), event.KindToolInvoke) {
		calls[ev.Tool.Name] = ev
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
