package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/mcpproxy"
	"github.com/sandtrail/sandtrail/record/event"
)

func newMCPProxyCmd(g *globals) *cobra.Command {
	var (
		name, session, apiSocket, listen, upstream string
		refuse                                     []string
	)
	cmd := &cobra.Command{
		Use:   "mcp-proxy [--name NAME] -- CMD ARGS... | mcp-proxy --listen ADDR --upstream URL",
		Short: "Run an MCP server behind a proxy that records every tool call",
		Long: `mcp-proxy stands between an agent and an MCP server and records, through the
daemon's tool API, each tools/call, resources/read and prompts/get as a
tool.invoke event: the tool, the server, the status (a result, isError, a
JSON-RPC error), the duration, and the input and output, of which the daemon
keeps what the policy's tool_io says (names, redacted summaries, or the whole
sealed to the investigators).

With -- CMD ARGS it runs a stdio MCP server: give the agent "sandtrail
mcp-proxy -- CMD ARGS" where it had "CMD ARGS". With --listen it serves the
streamable-HTTP transport in front of the server at --upstream.

The proxy is transparent: the same bytes pass both ways, batches and
notifications included, and a message it cannot parse is recorded as
malformed and passed on. The one exception is a tool the policy's
tool_io.refuse names (or --refuse): its tools/call never reaches the server,
and the client gets a JSON-RPC error (code -32001).

The tools refused come from the daemon at start; without a daemon to record
to, the proxy does not start. Diagnostics go to stderr: stdout is the MCP
stream.`,
		Example: `  sandtrail mcp-proxy --name filesystem -- npx -y @modelcontextprotocol/server-filesystem /work
  sandtrail mcp-proxy --listen 127.0.0.1:8931 --upstream http://127.0.0.1:8930/mcp`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 0) == (listen == "") {
				return usageErr(errors.New("mcp-proxy: give either -- CMD ARGS (a stdio server) or --listen with --upstream (an HTTP server)"))
			}
			for _, r := range refuse {
				if _, err := path.Match(r, ""); err != nil || r == "" {
					return usageErr(fmt.Errorf("mcp-proxy: --refuse %q is not a glob", r))
				}
			}
			cl := api.NewUnixClient(apiSocket)
			ctx := cmd.Context()
			pol, err := cl.ToolPolicy(ctx)
			if err != nil {
				return fmt.Errorf("mcp-proxy: nothing could be recorded, so the server is not run: %w", err)
			}
			globs := append(pol.Refuse, refuse...)
			rec := newAPIRecorder(ctx, cl, session)
			o := mcpproxy.Options{Server: name, Recorder: rec, Refuse: func(tool string) bool {
				for _, g := range globs {
					if ok, _ := path.Match(g, tool); ok {
						return true
					}
				}
				return false
			}}
			if listen != "" {
				return serveMCPHTTP(ctx, listen, upstream, o)
			}
			c := exec.CommandContext(ctx, args[0], args[1:]...)
			c.Stderr = os.Stderr
			err = mcpproxy.Stdio(ctx, c, os.Stdin, os.Stdout, o)
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return &exitError{code: ee.ExitCode(), err: fmt.Errorf("mcp-proxy: the server %s", ee)}
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the server's name in the record (default: the name it gives in its initialize result)")
	f.StringVar(&session, "session", "self", "the session to record in: self (the proxy's own, inside a session) or an id (root outside every session)")
	f.StringVar(&apiSocket, "api-socket", "/run/sandtrail/api.sock", "the daemon's tool API socket (env SANDTRAIL_API_SOCKET)")
	f.StringVar(&listen, "listen", "", "serve the streamable-HTTP transport on this address (with --upstream)")
	f.StringVar(&upstream, "upstream", "", "the HTTP MCP server's endpoint URL (with --listen)")
	f.StringArrayVar(&refuse, "refuse", nil, "also refuse the tools matching this glob (repeatable), beside the policy's tool_io.refuse")
	if v := os.Getenv("SANDTRAIL_API_SOCKET"); v != "" {
		_ = f.Set("api-socket", v)
	}
	return cmd
}

// serveMCPHTTP serves the proxy's HTTP transport on listen until ctx ends.
func serveMCPHTTP(ctx context.Context, listen, upstream string, o mcpproxy.Options) error {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr(fmt.Errorf("mcp-proxy: --upstream %q: want an http(s) URL of the server's MCP endpoint", upstream))
	}
	h, err := mcpproxy.NewHTTP(u, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("mcp-proxy: %w", err)
	}
	fmt.Fprintf(os.Stderr, "sandtrail mcp-proxy: serving %s in front of %s\n", ln.Addr(), u)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if c, ok := h.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// apiRecorder posts the proxy's calls to the tool API: the one place a
// Call becomes a tool.invoke.
type apiRecorder struct {
	ctx     context.Context
	cl      *api.Client
	session string
}

func newAPIRecorder(ctx context.Context, cl *api.Client, session string) *apiRecorder {
	return &apiRecorder{ctx: context.WithoutCancel(ctx), cl: cl, session: session}
}

func (r *apiRecorder) Record(c mcpproxy.Call) {
	p := toolPost(c)
	if _, err := r.cl.Post(r.ctx, r.session, p); err != nil {
		fmt.Fprintf(os.Stderr, "sandtrail mcp-proxy: %s %s not recorded: %v\n", c.Method, c.Name, err)
	}
}

// Lost records that the proxy dropped n calls because the daemon fell
// behind: a tool.invoke of the proxy itself, status error.
func (r *apiRecorder) Lost(n int) {
	p := &api.Post{Kind: event.KindToolInvoke, TS: time.Now().UTC(), Tool: &event.Tool{Name: "mcp-proxy", Status: event.ToolError,
		Error: fmt.Sprintf("%d calls not recorded: the daemon fell behind", n)}}
	if _, err := r.cl.Post(r.ctx, r.session, p); err != nil {
		fmt.Fprintf(os.Stderr, "sandtrail mcp-proxy: %d calls not recorded, and the loss neither: %v\n", n, err)
	}
}

// toolPost is the tool.invoke of one call the proxy saw.
func toolPost(c mcpproxy.Call) *api.Post {
	name := c.Name
	if c.Status == mcpproxy.StatusMalformed {
		name = "malformed message from the " + c.Direction
	}
	if name == "" {
		name = "(unnamed)"
	}
	if len(name) > 256 {
		name = name[:256]
	}
	p := &api.Post{Kind: event.KindToolInvoke, TS: c.Start.UTC(), Tool: &event.Tool{Name: name, Server: c.Server, Method: c.Method,
		Status: c.Status, Error: c.Error, DurationMS: c.Duration.Milliseconds()}}
	if c.Input != nil {
		in := string(c.Input)
		p.Input = &in
	}
	if c.Output != nil {
		out := string(c.Output)
		p.Output = &out
	}
	return p
}
