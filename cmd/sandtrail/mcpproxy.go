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
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/mcpproxy"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
)

// mcpProxyOpts are mcp-proxy's flags.
type mcpProxyOpts struct {
	name, session, apiSocket, listen, upstream string
	refuse                                     []string
}

func newMCPProxyCmd(*globals) *cobra.Command {
	var o mcpProxyOpts
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
			return o.run(cmd.Context(), args)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "the server's name in the record (default: the name it gives in its initialize result)")
	f.StringVar(&o.session, "session", "self", "the session to record in: self (the proxy's own, inside a session) or an id (root outside every session)")
	f.StringVar(&o.apiSocket, "api-socket", "/run/sandtrail/api.sock", "the daemon's tool API socket (env SANDTRAIL_API_SOCKET)")
	f.StringVar(&o.listen, "listen", "", "serve the streamable-HTTP transport on this address (with --upstream)")
	f.StringVar(&o.upstream, "upstream", "", "the HTTP MCP server's endpoint URL (with --listen)")
	f.StringArrayVar(&o.refuse, "refuse", nil, "also refuse the tools matching this glob (repeatable), beside the policy's tool_io.refuse")
	if v := os.Getenv("SANDTRAIL_API_SOCKET"); v != "" {
		_ = f.Set("api-socket", v)
	}
	return cmd
}

// run asks the daemon for the tools refused, then runs the stdio server of
// args, or serves the HTTP transport, recording through the tool API.
func (o *mcpProxyOpts) run(ctx context.Context, args []string) error {
	if (len(args) == 0) == (o.listen == "") {
		return usageErr(errors.New("mcp-proxy: give either -- CMD ARGS (a stdio server) or --listen with --upstream (an HTTP server)"))
	}
	for _, r := range o.refuse {
		if _, err := path.Match(r, ""); err != nil || r == "" {
			return usageErr(fmt.Errorf("mcp-proxy: --refuse %q is not a glob", r))
		}
	}
	cl := api.NewUnixClient(o.apiSocket)
	pol, err := cl.ToolPolicy(ctx)
	if err != nil {
		return fmt.Errorf("mcp-proxy: nothing could be recorded, so the server is not run: %w", err)
	}
	globs := append(pol.Refuse, o.refuse...)
	po := mcpproxy.Options{Server: o.name, Recorder: newAPIRecorder(ctx, cl, o.session), Refuse: func(tool string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, tool); ok {
				return true
			}
		}
		return false
	}}
	if o.listen != "" {
		return serveMCPHTTP(ctx, o.listen, o.upstream, po)
	}
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Stderr = os.Stderr
	err = mcpproxy.Stdio(ctx, c, os.Stdin, os.Stdout, po)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode(), err: fmt.Errorf("mcp-proxy: the server %s", ee)}
	}
	return err
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

// Record posts c; a post the daemon refuses (too large, say) is posted
// again without the whole I/O, so that the call is in the record whatever
// it carried.
func (r *apiRecorder) Record(c mcpproxy.Call) {
	p := toolPost(c)
	_, err := r.cl.Post(r.ctx, r.session, p)
	if err != nil && (p.Input != nil || p.Output != nil) {
		withoutIO(p, fmt.Sprintf("the whole I/O (%d bytes) was not taken: %v", len(c.Input)+len(c.Output), err))
		_, err = r.cl.Post(r.ctx, r.session, p)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandtrail mcp-proxy: %s %s not recorded: %v\n", c.Method, render.Clean(c.Name, 128), err)
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

// maxPostIO bounds the input and output one post carries whole: past it
// the post carries their heads as summaries instead (api.MaxBody bounds
// the post, and JSON escaping can double the bytes).
const maxPostIO = api.MaxBody / 3

// toolPost is the tool.invoke of one call the proxy saw.
func toolPost(c mcpproxy.Call) *api.Post {
	name := c.Name
	if c.Status == mcpproxy.StatusMalformed {
		name = "malformed message from the " + c.Direction
	}
	if name == "" {
		name = "(unnamed)"
	}
	p := &api.Post{Kind: event.KindToolInvoke, TS: c.Start.UTC(), Tool: &event.Tool{Name: event.Clip(strings.ToValidUTF8(name, "?"), 256), Server: c.Server,
		Method: c.Method, Status: c.Status, Error: c.Error, DurationMS: c.Duration.Milliseconds()}}
	in, out := string(c.Input), string(c.Output)
	p.Input, p.Output = &in, &out
	if c.Input == nil {
		p.Input = nil
	}
	if c.Output == nil {
		p.Output = nil
	}
	if len(in)+len(out) > maxPostIO {
		withoutIO(p, fmt.Sprintf("the whole I/O (%d bytes) is over the %d a post carries", len(in)+len(out), maxPostIO))
	}
	return p
}

// withoutIO drops the whole input and output from p, keeping their heads
// as the summaries and saying why in the error.
func withoutIO(p *api.Post, why string) {
	head := func(s *string) string {
		if s == nil {
			return ""
		}
		return event.Clip(strings.ToValidUTF8(*s, "?"), 4096)
	}
	p.Tool.InputSummary, p.Tool.OutputSummary = head(p.Input), head(p.Output)
	p.Input, p.Output = nil, nil
	if p.Tool.Error != "" {
		why = p.Tool.Error + "; " + why
	}
	p.Tool.Error = why
}
