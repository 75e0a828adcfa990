package mcpproxy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// readSize is the read buffer of each direction: a read returns what the
// pipe holds, so most messages take one read and one write.
const readSize = 64 << 10

// Stdio runs cmd (a stdio MCP server), relaying in (the client's side, e.g.
// os.Stdin) to the server's stdin and the server's stdout to out, byte for
// byte, until both directions end, and returns the server's exit error (or
// the error starting it). The server's stderr goes to cmd.Stderr, or
// os.Stderr when that is nil. When ctx ends the server is killed.
//
// Each direction is read in chunks and forwarded before it is parsed, so
// parsing adds no latency; only with Options.Refuse are the client's lines
// held until complete (and parsed) before they are forwarded. The answers
// to refused calls are written to out between two of the server's lines.
//
// When the server's output ends, Stdio returns after the server has exited,
// even if in is still open: a read of in that is under way then ends by
// itself with in's next bytes or its close, whose forwarding fails.
func Stdio(ctx context.Context, cmd *exec.Cmd, in io.Reader, out io.Writer, o Options) error {
	o = o.withDefaults()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	sin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("mcpproxy: server stdin: %w", err)
	}
	sout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("mcpproxy: server stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mcpproxy: starting server: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()

	q := newQueue(o)
	t := newTracker(&serverName{fixed: o.Server}, q, o.Pending)
	cw := &boundaryWriter{w: out}
	go func() {
		up := &Stream{Refuse: o.Refuse, Limit: o.LineLimit}
		relay(in, sin, up, client, t, cw)
		sin.Close()
	}()
	down := &Stream{Limit: o.LineLimit}
	relay(sout, writerFunc(cw.forward), down, server, t, nil)
	err = cmd.Wait()
	t.finish("stream ended")
	q.close()
	return err
}

// relay copies one direction, chunk by chunk, and tracks what it carries.
// A failed write stops forwarding but not reading: a peer that writes on
// is drained rather than blocked.
func relay(r io.Reader, w io.Writer, s *Stream, from side, t *tracker, replies *boundaryWriter) {
	buf := make([]byte, readSize)
	var werr error
	for {
		n, err := r.Read(buf)
		if n > 0 {
			at := time.Now()
			step := s.Feed(buf[:n])
			werr = forward(w, step, werr)
			handleStep(step, from, t, replies, at)
		}
		if err != nil {
			break
		}
		if werr != nil && from == client {
			return
		}
	}
	step := s.Flush()
	werr = forward(w, step, werr)
	handleStep(step, from, t, replies, time.Now())
}

func forward(w io.Writer, step *Step, werr error) error {
	for _, b := range step.Forward {
		if werr != nil {
			return werr
		}
		_, werr = w.Write(b)
	}
	return werr
}

// handleStep writes the answers to refused calls and hands the lines to
// the tracker.
func handleStep(step *Step, from side, t *tracker, replies *boundaryWriter, at time.Time) {
	for _, r := range step.Replies {
		if replies != nil {
			_ = replies.reply(r)
		}
	}
	done := time.Now()
	for i := range step.Lines {
		trackLine(&step.Lines[i], from, t, at, done)
	}
}

// trackLine hands one line to the tracker: its refused requests, its other
// messages, or why it is malformed.
func trackLine(l *Line, from side, t *tracker, at, done time.Time) {
	if l.Over {
		reason := "line longer than the limit, forwarded unparsed"
		if l.Dropped {
			reason = "line longer than the limit, dropped: a refusal policy is in force"
		}
		t.malformed(from, reason, at)
		return
	}
	if !l.Parsed {
		l.Msgs, l.Err = Parse(l.Raw)
	}
	if l.Err != nil {
		reason := l.Err.Error()
		if l.Dropped {
			reason += "; dropped: read leniently, it holds a refused call"
		}
		t.malformed(from, reason, at)
		if !l.Dropped {
			return
		}
	}
	msgs := l.Msgs
	if len(l.Refused) > 0 {
		msgs = make([]Message, 0, len(l.Msgs))
		r := 0
		for i := range l.Msgs {
			if r < len(l.Refused) && l.Refused[r] == i {
				t.refused(&l.Msgs[i], at, done)
				r++
				continue
			}
			msgs = append(msgs, l.Msgs[i])
		}
	}
	if !l.Dropped {
		t.messages(from, msgs, at)
	}
}

// boundaryWriter is the client's side of a stdio proxy: the server's
// bytes, and the proxy's own answers, each written only between two of the
// server's lines.
type boundaryWriter struct {
	mu    sync.Mutex
	w     io.Writer
	mid   bool // the last byte forwarded did not end a line
	queue [][]byte
}

func (b *boundaryWriter) forward(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.w.Write(p)
	if err != nil || len(p) == 0 {
		return n, err
	}
	b.mid = p[len(p)-1] != '\n'
	for !b.mid && len(b.queue) > 0 {
		_, err = b.w.Write(b.queue[0])
		b.queue = b.queue[1:]
	}
	return n, err
}

func (b *boundaryWriter) reply(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mid {
		b.queue = append(b.queue, p)
		return nil
	}
	_, err := b.w.Write(p)
	return err
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
