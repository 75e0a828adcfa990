package mcpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// serverEnv makes the test binary a stdio server for TestStdio: it answers
// each request with its params, says "garbage line" before answering the
// tool "garbage", sends a 5 MiB text for the tool "big", and for "hang"
// never answers.
const serverEnv = "MCPPROXY_TEST_SERVER"

func runServerHelper() int {
	r := bufio.NewReader(os.Stdin)
	w := bufio.NewWriter(os.Stdout)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		msgs, err := Parse(line)
		if err != nil || len(msgs) != 1 || msgs[0].Kind != Request {
			continue
		}
		m := msgs[0]
		switch callName(m.Method, m.Params) {
		case "hang":
			continue
		case "garbage":
			w.WriteString("garbage line\n")
		case "big":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n", m.ID, strings.Repeat("b", 5<<20))
			w.Flush()
			continue
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`+"\n", m.ID, m.Params)
		w.Flush()
	}
}

func serverHelper() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	return cmd
}

func TestStdio(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rec := &memRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- Stdio(context.Background(), serverHelper(), inR, outW, Options{Recorder: rec, Refuse: func(tool string) bool { return tool == "secret" }})
		outW.Close()
	}()
	lines := []string{
		` {"jsonrpc":"2.0", "id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}  ` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n",
		`{"jsonrpc":"2.0","id":"g","method":"tools/call","params":{"name":"garbage"}}` + "\n",
		"not json\n",
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"secret"}}` + "\n",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"big"}}` + "\n",
	}
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		got <- string(b)
	}()
	for _, l := range lines {
		if _, err := io.WriteString(inW, l); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("Stdio = %v", err)
	}
	out := <-got
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"echo":{"name":"echo","arguments":{"a":1}}}}` + "\n",
		"garbage line\n" + `{"jsonrpc":"2.0","id":"g","result":{"echo":{"name":"garbage"}}}` + "\n",
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"tool \"secret\" refused by policy"}}` + "\n",
		`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"` + strings.Repeat("b", 5<<20) + `"}]}}` + "\n",
	}
	if out != strings.Join(want, "") {
		t.Errorf("client got %d bytes, want %d: %.300q", len(out), len(strings.Join(want, "")), out)
	}
	// The two directions race: order the calls by what they are.
	calls := slices.Clone(rec.calls)
	slices.SortStableFunc(calls, func(a, b Call) int { return strings.Compare(a.Name+a.Direction, b.Name+b.Direction) })
	checkCalls(t, calls, []wantCall{
		{method: "tools/call", name: "big", status: StatusOK},
		{status: StatusMalformed, dir: "client"},
		{method: "tools/call", name: "echo", status: StatusOK, input: `{"a":1}`},
		{method: "tools/call", name: "garbage", status: StatusOK},
		{method: "tools/call", name: "secret", status: StatusRefused},
		{status: StatusMalformed, dir: "server"},
	})
	if n := len(calls[0].Output); n < 5<<20 {
		t.Errorf("big output = %d bytes, want the whole 5 MiB result", n)
	}
}

// TestStdioCancel: when the context ends, the server is killed, its calls
// still pending are reported unanswered, and Stdio returns though the
// client has not closed its side.
func TestStdioCancel(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	defer inR.Close()
	rec := &memRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Stdio(ctx, serverHelper(), inR, io.Discard, Options{Recorder: rec}) }()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}`+"\n")
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Stdio = nil, want the killed server's exit error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stdio did not return after the context ended")
	}
	checkCalls(t, rec.calls, []wantCall{{method: "tools/call", name: "hang", status: StatusUnanswered}})
}
