// Package mcptest runs the official MCP SDK (@modelcontextprotocol/sdk,
// from the npm registry) in tests: a stdio server with three tools (echo,
// fail, secret), and a client that calls them through whatever command it
// is given, printing what it got as JSON (Result).
package mcptest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The official MCP SDK that the end-to-end tests run against.
const (
	SDKPackage = "@modelcontextprotocol/sdk"
	SDKVersion = "1.32.2"
)

// SDKModules returns a node_modules holding the SDK, installed into the
// user's cache on first use. It skips when node or npm is missing, unless
// CI is set.
func SDKModules(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed for the SDK tests: %v", tool, err)
			}
			t.Skipf("%s is not installed: the tests against the official MCP SDK need node and npm", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "sandtrail-test", "mcp-sdk-"+SDKVersion)
	modules := filepath.Join(dir, "node_modules")
	// The marker is written after a whole install: an install cut short
	// is done again.
	done := filepath.Join(dir, ".installed")
	if _, err := os.Stat(done); err == nil {
		return modules
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Test binaries of several packages run at once: one installs, the
	// others wait for it.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done); err == nil {
		return modules
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", SDKPackage+"@"+SDKVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", SDKPackage, SDKVersion, err, out)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return modules
}

// NodeDir writes the scripts into a new directory beside a link to the
// SDK's node_modules: in parent, or a test temporary directory when
// parent is empty.
func NodeDir(t *testing.T, parent string, scripts map[string]string) string {
	t.Helper()
	modules := SDKModules(t)
	dir := t.TempDir()
	if parent != "" {
		var err error
		if dir, err = os.MkdirTemp(parent, "mcp-"); err != nil {
			t.Fatal(err)
		}
	}
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

// ServerTools registers the tools of the test server on an McpServer
// called server: echo returns its text (after a log notification), fail
// reports an error, secret must never run.
const ServerTools = `
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

const StdioServer = `
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { newServer } from './tools.mjs';
await newServer().connect(new StdioServerTransport());
`

// ClientCalls runs the test's calls on a connected Client and prints them
// as JSON.
const ClientCalls = `
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

const StdioClient = `
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { run } from './calls.mjs';
const [command, ...args] = JSON.parse(process.env.MCP_SERVER_CMD);
await run(new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' }));
`

// Result is what ClientCalls prints.
type Result struct {
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

// HTTPServer serves the test tools with the SDK's streamable-HTTP
// transport on a loopback port, which it prints; argv[2] "json" makes it
// answer with application/json instead of event streams. It also counts
// the requests it gets, by method, at /count.
const HTTPServer = `
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { newServer } from './tools.mjs';

const transport = new StreamableHTTPServerTransport({
  sessionIdGenerator: () => randomUUID(),
  enableJsonResponse: process.argv[2] === 'json',
});
await newServer().connect(transport);
const seen = {};
const srv = http.createServer((req, res) => {
  if (req.url === '/count') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(seen));
    return;
  }
  seen[req.method] = (seen[req.method] ?? 0) + 1;
  if (req.headers['authorization'] !== 'Bearer t0ken') {
    res.statusCode = 401;
    res.end('no token');
    return;
  }
  transport.handleRequest(req, res);
});
srv.listen(0, '127.0.0.1', () => console.log(srv.address().port));
`

// HTTPClient runs ClientCalls over the SDK's streamable-HTTP client
// transport, against MCP_URL, ending with a DELETE of its session.
const HTTPClient = `
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { run } from './calls.mjs';
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: 'Bearer t0ken' } },
});
await run(transport, () => transport.terminateSession());
`
