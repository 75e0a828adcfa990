package mcpproxy

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// memRecorder keeps what it is given.
type memRecorder struct {
	mu    sync.Mutex
	calls []Call
	lost  int
}

func (r *memRecorder) Record(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *memRecorder) Lost(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost += n
}

// pair drives both directions' Streams and a tracker as Stdio does,
// without processes, collecting what each side would receive.
type pair struct {
	up, down Stream
	t        *tracker
	q        *queue
	rec      *memRecorder
	toServer bytes.Buffer
	toClient bytes.Buffer
	clock    time.Time
}

func newPair(o Options) *pair {
	rec := &memRecorder{}
	o.Recorder = rec
	o = o.withDefaults()
	p := &pair{up: Stream{Refuse: o.Refuse}, rec: rec, clock: time.Unix(1000, 0)}
	p.q = newQueue(o)
	p.t = newTracker(&serverName{fixed: o.Server}, p.q, o.Pending)
	return p
}

func (p *pair) tick() time.Time {
	p.clock = p.clock.Add(time.Millisecond)
	return p.clock
}

// client sends bytes from the client.
func (p *pair) client(s string) {
	step := p.up.Feed([]byte(s))
	for _, b := range step.Forward {
		p.toServer.Write(b)
	}
	for _, r := range step.Replies {
		p.toClient.Write(r)
	}
	at := p.tick()
	for i := range step.Lines {
		trackLine(&step.Lines[i], client, p.t, at, at)
	}
}

// server sends bytes from the server.
func (p *pair) server(s string) {
	step := p.down.Feed([]byte(s))
	for _, b := range step.Forward {
		p.toClient.Write(b)
	}
	at := p.tick()
	for i := range step.Lines {
		trackLine(&step.Lines[i], server, p.t, at, at)
	}
}

// end ends both streams and returns the calls recorded.
func (p *pair) end() []Call {
	p.t.finish("stream ended")
	p.q.close()
	return p.rec.calls
}

type wantCall struct {
	method, name, status, input, output, dir string
}

func checkCalls(t *testing.T, got []Call, want []wantCall) {
	t.Helper()
	if len(got) != len(want) {
		for _, c := range got {
			t.Logf("call %s %q %s %s (%s)", c.Method, c.Name, c.Status, c.Direction, c.Error)
		}
		t.Fatalf("%d calls, want %d", len(got), len(want))
	}
	for i, w := range want {
		c := got[i]
		if c.Method != w.method || c.Name != w.name || c.Status != w.status || (w.input != "" && string(c.Input) != w.input) ||
			(w.output != "" && string(c.Output) != w.output) || c.Direction != w.dir {
			t.Errorf("call %d = %s %q %s in %.200s out %.200s dir %q (%s), want %+v", i, c.Method, c.Name, c.Status, c.Input, c.Output, c.Direction, c.Error, w)
		}
	}
}

func TestCorrelation(t *testing.T) {
	p := newPair(Options{})
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"s1","method":"resources/read","params":{"uri":"file:///x"}}`,
		`[{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p"}},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow"}}`,
		`not json`,
	}, "\n") + "\n"
	p.client(in)
	// The server asks the client something with an id that the client's
	// own requests use too; the client answers it.
	p.server(`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}` + "\n")
	p.client(`{"jsonrpc":"2.0","id":1,"result":{"role":"assistant"}}` + "\n")
	out := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"result":{"serverInfo":{"name":"demo","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":"s1","error":{"code":-32002,"message":"not found"}}`,
		`[{"jsonrpc":"2.0","id":3,"result":{"tools":[]}},{"jsonrpc":"2.0","id":2,"result":{"messages":[]}}]`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}`,
		`{broken`,
	}, "\n") + "\n"
	p.server(out)
	calls := p.end()
	checkCalls(t, calls, []wantCall{
		{dir: "client", status: StatusMalformed},
		{method: "resources/read", name: "file:///x", status: StatusError, output: `{"code":-32002,"message":"not found"}`},
		{method: "prompts/get", name: "p", status: StatusOK, input: `{"name":"p"}`},
		{method: "tools/call", name: "echo", status: StatusOK, input: `{"text":"hi"}`, output: `{"content":[{"type":"text","text":"hi"}]}`},
		{dir: "server", status: StatusMalformed},
		{method: "tools/call", name: "slow", status: StatusUnanswered},
	})
	if got := p.toServer.String(); got != in+`{"jsonrpc":"2.0","id":1,"result":{"role":"assistant"}}`+"\n" {
		t.Errorf("server got %q, want the client's bytes", got)
	}
	for _, c := range calls[1:4] {
		if c.Server != "demo" {
			t.Errorf("call %s server = %q, want demo (from initialize)", c.Name, c.Server)
		}
		if c.Duration <= 0 {
			t.Errorf("call %s duration = %v, want > 0", c.Name, c.Duration)
		}
	}
}

func TestRefusal(t *testing.T) {
	refuse := func(tool string) bool { return tool == "secret" }
	tests := []struct {
		name, in, toServer, toClient string
		refused                      int
	}{
		{
			name:     "single",
			in:       `{"jsonrpc":"2.0","id":"q\"1","method":"tools/call","params":{"name":"secret"}}` + "\n",
			toClient: `{"jsonrpc":"2.0","id":"q\"1","error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
			refused:  1,
		},
		{
			name:     "escaped name",
			in:       `{"jsonrpc":"2.0","id":1,"method":"tools\u002fcall","params":{"name":"se\u0063ret","name":"secret"}}` + "\n",
			toClient: `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
			refused:  1,
		},
		{
			name:     "in a batch",
			in:       ` [{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}, {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret"}} ,{"jsonrpc":"2.0","method":"n"}]` + "\r\n",
			toServer: ` [{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","method":"n"}]` + "\r\n",
			toClient: `[{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}]` + "\n",
			refused:  1,
		},
		{
			name:     "batch of only refused",
			in:       `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret"}}]` + "\n",
			toClient: `[{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}},{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}]` + "\n",
			refused:  2,
		},
		{
			name:     "after a byte-order mark",
			in:       "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret"}}` + "\n",
			toClient: `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
			refused:  1,
		},
		{
			name:     "not JSON to Go, read by a lenient server",
			in:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"secret","arguments":{"n":NaN}}}` + "\n",
			toClient: `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
			refused:  1,
		},
		{
			name:     "CR-separated, as universal newlines split",
			in:       `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\r" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret"}}` + "\n",
			toClient: `{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
			refused:  1,
		},
		{
			name:     "malformed without a refused call",
			in:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":NaN}}}` + "\n",
			toServer: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":NaN}}}` + "\n",
		},
		{
			name:     "allowed and a notification named like a call",
			in:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n" + `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"secret"}}` + "\n",
			toServer: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n" + `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"secret"}}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(Options{Refuse: refuse})
			// Byte by byte: a held line must not leak before it is whole.
			for i := range len(tt.in) {
				p.client(tt.in[i : i+1])
			}
			if got := p.toServer.String(); got != tt.toServer {
				t.Errorf("server got %q, want %q", got, tt.toServer)
			}
			if got := p.toClient.String(); got != tt.toClient {
				t.Errorf("client got %q, want %q", got, tt.toClient)
			}
			n := 0
			for _, c := range p.end() {
				if c.Status == StatusRefused {
					n++
					if c.Name != "secret" || c.Method != "tools/call" || !strings.Contains(string(c.Output), "-32001") {
						t.Errorf("refused call = %+v", c)
					}
				}
			}
			if n != tt.refused {
				t.Errorf("%d refused calls, want %d", n, tt.refused)
			}
		})
	}
}

func TestLongLines(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 3000) + `"}]}}` + "\n"
	t.Run("streamed", func(t *testing.T) {
		s := Stream{Limit: 1000}
		var fwd bytes.Buffer
		var lines []Line
		for i := 0; i < len(big); i += 100 {
			step := s.Feed([]byte(big[i:min(i+100, len(big))]))
			for _, b := range step.Forward {
				fwd.Write(b)
			}
			lines = append(lines, step.Lines...)
		}
		if fwd.String() != big {
			t.Errorf("forwarded %d bytes, want the %d of the line", fwd.Len(), len(big))
		}
		if len(lines) != 1 || !lines[0].Over || lines[0].Dropped {
			t.Errorf("lines = %+v, want one over the limit, not dropped", lines)
		}
	})
	t.Run("held", func(t *testing.T) {
		s := Stream{Limit: 1000, Refuse: func(string) bool { return false }}
		var fwd bytes.Buffer
		var lines []Line
		for _, chunk := range []string{big[:2000], big[2000:], `{"id":2,"method":"ping"}` + "\n"} {
			step := s.Feed([]byte(chunk))
			for _, b := range step.Forward {
				fwd.Write(b)
			}
			lines = append(lines, step.Lines...)
		}
		if fwd.String() != `{"id":2,"method":"ping"}`+"\n" {
			t.Errorf("forwarded %q, want only the short line", fwd.String())
		}
		if len(lines) != 2 || !lines[0].Dropped || lines[1].Over {
			t.Errorf("lines = %+v, want one dropped, one kept", lines)
		}
	})
	t.Run("under the limit across chunks", func(t *testing.T) {
		p := newPair(Options{})
		p.client(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}` + "\n")
		for i := 0; i < len(big); i += 7 {
			p.server(big[i:min(i+7, len(big))])
		}
		calls := p.end()
		if len(calls) != 1 || calls[0].Status != StatusOK || len(calls[0].Output) != len(big)-len(`{"jsonrpc":"2.0","id":1,"result":}`)-1 {
			t.Errorf("calls = %+v, want one ok with the whole result", calls)
		}
	})
}

func TestPendingBounded(t *testing.T) {
	p := newPair(Options{Pending: 2})
	for _, id := range []string{"1", "2", "3"} {
		p.client(`{"id":` + id + `,"method":"tools/call","params":{"name":"t` + id + `"}}` + "\n")
	}
	p.server(`{"id":3,"result":{}}` + "\n" + `{"id":1,"result":{}}` + "\n")
	calls := p.end()
	checkCalls(t, calls, []wantCall{
		{method: "tools/call", name: "t1", status: StatusUnanswered},
		{method: "tools/call", name: "t3", status: StatusOK},
		{method: "tools/call", name: "t2", status: StatusUnanswered},
	})
}

func TestEarlyResponse(t *testing.T) {
	// Stdio parses after forwarding, so the server's answer can be
	// parsed before its request: it is kept until the request comes.
	p := newPair(Options{})
	p.server(`{"id":9,"result":{"stale":true}}` + "\n")
	reqAt := p.tick()
	msgs, _ := Parse([]byte(`{"id":9,"method":"tools/call","params":{"name":"late"}}`))
	p.t.messages(client, msgs, reqAt)
	msgs, _ = Parse([]byte(`{"id":9,"result":{"fast":true}}`))
	respAt := reqAt.Add(time.Microsecond)
	p.t.mu.Lock()
	p.t.keepEarly(&p.t.ns[client], "n10", &msgs[0], respAt)
	p.t.mu.Unlock()
	msgs, _ = Parse([]byte(`{"id":10,"method":"tools/call","params":{"name":"raced"}}`))
	p.t.messages(client, msgs, reqAt)
	calls := p.end()
	checkCalls(t, calls, []wantCall{
		{method: "tools/call", name: "raced", status: StatusOK, output: `{"fast":true}`},
		{method: "tools/call", name: "late", status: StatusUnanswered},
	})
}

func TestQueueDrops(t *testing.T) {
	block := make(chan struct{})
	rec := &blockingRecorder{block: block}
	q := newQueue(Options{Queue: 2, QueueBytes: 1 << 20, Recorder: rec})
	for range 10 {
		q.put(Call{Method: "tools/call"})
	}
	close(block)
	q.close()
	if rec.n+rec.lost != 10 || rec.lost == 0 {
		t.Errorf("recorded %d, lost %d, want 10 in all with some lost", rec.n, rec.lost)
	}
}

type blockingRecorder struct {
	block   chan struct{}
	n, lost int
}

func (r *blockingRecorder) Record(Call) { <-r.block; r.n++ }
func (r *blockingRecorder) Lost(n int)  { r.lost += n }
