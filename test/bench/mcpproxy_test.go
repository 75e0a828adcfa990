package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/mcpproxy"
)

// mcpEchoEnv makes the test binary, run as TestMCPEchoServerHelper, the
// stdio echo server of BenchmarkMCPProxy.
const mcpEchoEnv = "SANDTRAIL_BENCH_MCP_ECHO"

// TestMCPEchoServerHelper is not a test: BenchmarkMCPProxy runs the test
// binary as this function to get a stdio MCP-like server. It answers every
// request line with a tools/call result whose text has
// params.arguments.size bytes.
func TestMCPEchoServerHelper(t *testing.T) {
	if os.Getenv(mcpEchoEnv) == "" {
		t.Skip("the echo server that BenchmarkMCPProxy runs")
	}
	mcpEchoServe(os.Stdin, os.Stdout)
	os.Exit(0)
}

func mcpEchoServe(in io.Reader, out io.Writer) {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	texts := map[int]string{}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage
			Params struct{ Arguments struct{ Size int } }
		}
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue
		}
		size := req.Params.Arguments.Size
		if _, ok := texts[size]; !ok {
			texts[size] = strings.Repeat("x", size)
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n", req.ID, texts[size])
		if w.Flush() != nil {
			return
		}
	}
}

// mcpEchoCmd is the echo server's command.
func mcpEchoCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPEchoServerHelper$")
	cmd.Env = append(os.Environ(), mcpEchoEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// mcpConn is a client's two pipes to a stdio server.
type mcpConn struct {
	w  io.Writer
	r  *bufio.Reader
	id int
}

// call sends one tools/call and waits for its answer.
func (c *mcpConn) call(b *testing.B, size int) time.Duration {
	c.id++
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"size":%d}}}`+"\n", c.id, size)
	start := time.Now()
	if _, err := io.WriteString(c.w, req); err != nil {
		b.Fatal(err)
	}
	line, err := c.r.ReadSlice('\n')
	for err == bufio.ErrBufferFull {
		_, err = c.r.ReadSlice('\n')
	}
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	_ = line
	return d
}

// mcpDirect starts an echo server the client talks to itself.
func mcpDirect(b *testing.B) *mcpConn {
	cmd := mcpEchoCmd()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return &mcpConn{w: in, r: bufio.NewReaderSize(out, 1<<20)}
}

// mcpRecorder counts the calls and their bytes. What a real recorder does
// with them (an event, a hash of the output) is its own cost, on its own
// goroutine: on 2 cores a recorder that JSON-encodes each 1 MiB output
// steals more time from both paths than the proxy spends.
type mcpRecorder struct {
	calls, bytes, lost atomic.Int64
}

func (r *mcpRecorder) Record(c mcpproxy.Call) {
	r.calls.Add(1)
	r.bytes.Add(int64(len(c.Input) + len(c.Output)))
}

func (r *mcpRecorder) Lost(n int) { r.lost.Add(int64(n)) }

// mcpProxied starts an echo server behind mcpproxy.Stdio, over OS pipes
// as a proxy process would have.
func mcpProxied(b *testing.B, o mcpproxy.Options) (*mcpConn, *mcpRecorder) {
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	rec := &mcpRecorder{}
	o.Recorder = rec
	done := make(chan error, 1)
	go func() {
		done <- mcpproxy.Stdio(context.Background(), mcpEchoCmd(), inR, outW, o)
		outW.Close()
	}()
	b.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Errorf("mcpproxy.Stdio: %v", err)
		}
		inR.Close()
		outR.Close()
	})
	return &mcpConn{w: inW, r: bufio.NewReaderSize(outR, 1<<20)}, rec
}

func quantileUS(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1e3
}

// BenchmarkMCPProxy measures the latency of one tools/call round trip to a
// stdio echo server (a re-exec of the test binary) straight over its pipes
// (the baseline) and through mcpproxy.Stdio, with and without a refusal
// policy (which holds each client line until it is whole), interleaved in
// the same run: each iteration makes one call of each. Results of 100
// bytes and of 1 MiB. Reports the p50 and p99 of each path in µs, the
// p50 that the proxy adds (added-p50-us, the target: well under 1 ms), and
// the p50 ratio (x-direct-p50).
func BenchmarkMCPProxy(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"100B", 100}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			direct := mcpDirect(b)
			proxied, rec := mcpProxied(b, mcpproxy.Options{Server: "echo"})
			policed, _ := mcpProxied(b, mcpproxy.Options{Server: "echo", Refuse: func(tool string) bool { return tool == "secret" }})
			for range 20 { // warm up: page in, start the recorders
				direct.call(b, size.n)
				proxied.call(b, size.n)
				policed.call(b, size.n)
			}
			var ds, ps, qs []time.Duration
			for b.Loop() {
				ds = append(ds, direct.call(b, size.n))
				ps = append(ps, proxied.call(b, size.n))
				qs = append(qs, policed.call(b, size.n))
			}
			d50, p50, q50 := quantileUS(ds, 0.5), quantileUS(ps, 0.5), quantileUS(qs, 0.5)
			b.ReportMetric(d50, "p50-us-direct")
			b.ReportMetric(quantileUS(ds, 0.99), "p99-us-direct")
			b.ReportMetric(p50, "p50-us-proxy")
			b.ReportMetric(quantileUS(ps, 0.99), "p99-us-proxy")
			b.ReportMetric(q50, "p50-us-proxy-policy")
			b.ReportMetric(p50-d50, "added-p50-us")
			b.ReportMetric(q50-d50, "added-p50-us-policy")
			b.ReportMetric(p50/d50, "x-direct-p50")
			if rec.calls.Load() == 0 {
				b.Error("the proxy recorded no call")
			}
			b.ReportMetric(float64(rec.lost.Load()), "calls-lost")
		})
	}
}
