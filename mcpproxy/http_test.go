package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/mcpproxy/mcptest"
)

// TestHTTPSDK runs the official SDK's streamable-HTTP client against the
// proxy in front of the SDK's server, with JSON and with event-stream
// responses.
func TestHTTPSDK(t *testing.T) {
	dir := mcptest.NodeDir(t, "", map[string]string{"tools.mjs": mcptest.ServerTools, "server.mjs": mcptest.HTTPServer, "calls.mjs": mcptest.ClientCalls, "client.mjs": mcptest.HTTPClient})
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			upstream := startHTTPServer(t, dir, mode)
			rec := &memRecorder{}
			h, err := NewHTTP(upstream, Options{Recorder: rec, Refuse: func(tool string) bool { return tool == "secret" }})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			types := map[string]int{}
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				mu.Lock()
				defer mu.Unlock()
				if r.Method == http.MethodPost {
					types[strings.Split(w.Header().Get("Content-Type"), ";")[0]]++
				}
			}))
			defer proxy.Close()

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "client.mjs"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "MCP_URL="+proxy.URL+"/mcp")
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node client.mjs: %v\n%s", err, out)
			}
			var r mcptest.Result
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("client printed %q: %v", out, err)
			}
			checkClient(t, r, mode == "sse")
			proxy.Close()
			h.(*HTTP).Close()
			checkRecorded(t, rec.calls)
			want := map[string]string{"json": "application/json", "sse": "text/event-stream"}[mode]
			if types[want] < 3 {
				t.Errorf("the POSTs were answered with %v, want %s for the calls", types, want)
			}
			if got := serverCounts(t, upstream); got["DELETE"] != 1 || got["POST"] < 5 {
				t.Errorf("the server got %v, want the session's POSTs and one DELETE", got)
			}
		})
	}
}

// startHTTPServer starts the node server and returns its endpoint.
func startHTTPServer(t *testing.T, dir, mode string) *url.URL {
	t.Helper()
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), mode)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's port: %v", err)
	}
	u, err := url.Parse("http://127.0.0.1:" + strings.TrimSpace(port) + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// serverCounts asks the node server how many requests of each method it
// got.
func serverCounts(t *testing.T, upstream *url.URL) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + upstream.Host + "/count")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var counts map[string]int
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &counts); err != nil {
		t.Fatalf("counts %q: %v", b, err)
	}
	return counts
}

// TestHTTPRefusedBatch: a POSTed batch holding a refused call never reaches
// the server; each of its requests is answered by the proxy.
func TestHTTPRefusedBatch(t *testing.T) {
	hits := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusAccepted)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL + "/mcp")
	rec := &memRecorder{}
	h, err := NewHTTP(u, Options{Recorder: rec, Refuse: func(tool string) bool { return tool == "secret" }})
	if err != nil {
		t.Fatal(err)
	}
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"secret"}},{"jsonrpc":"2.0","method":"notifications/x"}]`
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)))
	h.(*HTTP).Close()
	want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"batch held back by policy: it holds a refused tool call"}},{"jsonrpc":"2.0","id":"b","error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}]`
	if got := w.Body.String(); got != want {
		t.Errorf("reply = %s, want %s", got, want)
	}
	if hits != 0 {
		t.Errorf("the server got %d requests, want none", hits)
	}
	checkCalls(t, rec.calls, []wantCall{
		{method: "tools/call", name: "echo", status: StatusRefused},
		{method: "tools/call", name: "secret", status: StatusRefused},
	})
}

// TestHTTPFailsClosed: with a refusal policy, a POST the proxy cannot read
// as the server might is not forwarded.
func TestHTTPFailsClosed(t *testing.T) {
	secret := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret"}}`
	tests := []struct {
		name, body, contentType, encoding string
		status                            int
		forwarded                         bool
	}{
		{name: "gzip", body: secret, contentType: "application/json", encoding: "gzip", status: http.StatusUnsupportedMediaType},
		{name: "utf-16", body: secret, contentType: "application/json; charset=utf-16", status: http.StatusUnsupportedMediaType},
		{name: "NaN", body: strings.Replace(secret, `"secret"}`, `"secret","arguments":{"n":NaN}}`, 1), contentType: "application/json", status: http.StatusOK},
		{name: "malformed, no refused call", body: `{"jsonrpc":"2.0","id":1,"method":"ping",}`, contentType: "application/json", status: http.StatusAccepted, forwarded: true},
		{name: "utf-8 allowed", body: `{"jsonrpc":"2.0","method":"notifications/x"}`, contentType: "application/json; charset=UTF-8", status: http.StatusAccepted, forwarded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(http.StatusAccepted)
			}))
			defer up.Close()
			u, _ := url.Parse(up.URL)
			h, err := NewHTTP(u, Options{Refuse: func(tool string) bool { return tool == "secret" }})
			if err != nil {
				t.Fatal(err)
			}
			defer h.(*HTTP).Close()
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.status || (hits.Load() > 0) != tt.forwarded {
				t.Errorf("status %d, forwarded %v (%s); want %d, %v", w.Code, hits.Load() > 0, w.Body.String(), tt.status, tt.forwarded)
			}
		})
	}
}

// TestHTTPAfterClose: an exchange that ends after Close does not panic.
func TestHTTPAfterClose(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	rec := &memRecorder{}
	h, err := NewHTTP(u, Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	h.(*HTTP).Close()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`)))
	if w.Code != http.StatusOK || len(rec.calls) != 0 {
		t.Errorf("status %d, %d calls; want 200 and none recorded after Close", w.Code, len(rec.calls))
	}
}
