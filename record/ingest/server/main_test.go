package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/journal"
)

// The test binary re-executes itself in these roles, selected by
// envRole, to get real separate processes with their own credentials and
// cgroups.
const (
	envRole    = "SANDTRAIL_INGEST_TEST_ROLE"
	envSock    = "SANDTRAIL_INGEST_TEST_SOCK"
	envJournal = "SANDTRAIL_INGEST_TEST_JOURNAL"
	envKey     = "SANDTRAIL_INGEST_TEST_KEY"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "":
		os.Exit(m.Run())
	case "client":
		if err := clientRole(os.Getenv(envSock), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "client role:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "hold":
		if err := holdRole(os.Getenv(envSock), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "hold role:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "handoff":
		if err := handoffRole(os.Getenv(envSock)); err != nil {
			fmt.Fprintln(os.Stderr, "handoff role:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "daemon":
		if err := daemonRole(os.Getenv(envSock), os.Getenv(envJournal), os.Getenv(envKey)); err != nil {
			fmt.Fprintln(os.Stderr, "daemon role:", err)
			os.Exit(1)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(envRole))
		os.Exit(2)
	}
}

// clientRole connects once, then for every line of in sends it as one
// frame and writes the reply frame as one line of out.
func clientRole(sock string, in io.Reader, out io.Writer) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if err := ingest.WriteFrame(c, sc.Bytes()); err != nil {
			return err
		}
		b, err := ingest.ReadFrame(c, ingest.MaxFrame)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
	}
	return sc.Err()
}

// holdRole opens and holds connections to sock, as told by the lines of
// in: "open N" opens N more and answers "admitted=A busy=B" (each
// connection is pinged with a request the server answers, so which were
// turned away is known without timing); "close" closes every held one and
// "churn N" opens and at once closes N, each answering "done".
func holdRole(sock string, in io.Reader, out io.Writer) error {
	var held []net.Conn
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var n int
		switch cmd := sc.Text(); {
		case cmd == "close":
			for _, c := range held {
				c.Close()
			}
			held = nil
			fmt.Fprintln(out, "done")
		case strings.HasPrefix(cmd, "churn "):
			if _, err := fmt.Sscanf(cmd, "churn %d", &n); err != nil {
				return err
			}
			for range n {
				c, err := net.Dial("unix", sock)
				if err != nil {
					return err
				}
				c.Close()
			}
			fmt.Fprintln(out, "done")
		case strings.HasPrefix(cmd, "open "):
			if _, err := fmt.Sscanf(cmd, "open %d", &n); err != nil {
				return err
			}
			admitted, busy := 0, 0
			for range n {
				c, err := net.Dial("unix", sock)
				if err != nil {
					return err
				}
				code, err := ping(c)
				switch {
				case err != nil:
					return err
				case code == ingest.CodeBusy:
					busy++
					c.Close()
				default:
					admitted++
					held = append(held, c)
				}
			}
			fmt.Fprintf(out, "admitted=%d busy=%d\n", admitted, busy)
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return sc.Err()
}

// ping sends c a request without events, which a server that admitted c
// answers malformed, and returns the reply's code: busy when the server
// turned c away (it sends that on accept and closes, so the write may
// fail; the reply is read all the same).
func ping(c net.Conn) (ingest.Code, error) {
	_ = ingest.WriteFrame(c, []byte(`{"v":1,"events":[]}`))
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := ingest.ReadFrame(c, ingest.MaxFrame)
	if err != nil {
		return "", fmt.Errorf("reading the reply to a ping: %w", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	rep, err := ingest.DecodeReply(b)
	if err != nil {
		return "", err
	}
	return rep.Code, nil
}

// handoffRole connects to sock, sends one batch (so the server has taken
// its identity), passes the connection over fd 3 (a unix socket to the
// parent) with SCM_RIGHTS, and exits.
func handoffRole(sock string) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	if err := ingest.WriteFrame(c, request(toolEvent("s", "before-handoff"))); err != nil {
		return err
	}
	b, err := ingest.ReadFrame(c, ingest.MaxFrame)
	if err != nil {
		return err
	}
	if rep, err := ingest.DecodeReply(b); err != nil || rep.Code != "" || rep.Results[0].Status != ingest.StatusOK {
		return fmt.Errorf("first batch: %+v, %v", rep, err)
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		return err
	}
	parent := os.NewFile(3, "parent")
	pc, err := net.FileConn(parent)
	if err != nil {
		return err
	}
	_, _, err = pc.(*net.UnixConn).WriteMsgUnix([]byte{1}, syscall.UnixRights(int(f.Fd())), nil)
	return err
}

// daemonRole is a minimal daemon: the real journal, the server, the tail
// loaded into the dedup set, and a graceful stop on SIGTERM.
func daemonRole(sock, dir, keyFile string) error {
	signer, err := journal.LoadSigner(keyFile)
	if err != nil {
		return err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "daemon", Level: hclog.Warn, Output: os.Stderr})
	j, err := journal.Open(dir, signer, journal.WithLogger(log), journal.WithCheckpointEvery(500))
	if err != nil {
		return err
	}
	srv := New(j, NewTable(), WithLogger(log))
	if _, err := srv.RememberTail(j.Size(), DefaultDedupSize, func(from uint64, fn func(uint64, []byte) error) error {
		return journal.Scan(dir, from, fn)
	}); err != nil {
		return err
	}
	ln, err := Listen(sock, 0o666)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Println("ready")
	select {
	case <-sig:
	case err := <-served:
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	return j.Close()
}

// testKey writes a fresh signer key into dir and returns its path and the
// verifier.
func testKey(t testing.TB, dir string) (string, string) {
	t.Helper()
	skey, vkey, err := journal.GenerateKey("sandtrail-ingest-test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, vkey
}

// journaled returns every event in the journal at dir.
func journaled(t *testing.T, dir string) []*event.Event {
	t.Helper()
	var out []*event.Event
	err := journal.Scan(dir, 0, func(seq uint64, raw []byte) error {
		var e event.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("entry %d: %w", seq, err)
		}
		out = append(out, &e)
		return nil
	})
	if err != nil {
		t.Fatalf("journal.Scan = %v", err)
	}
	return out
}

// startServer serves srv on a socket in a directory every user can reach.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	dir := publicDir(t)
	sock := filepath.Join(dir, "ingest.sock")
	ln, err := Listen(sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown = %v", err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve = %v, want ErrClosed", err)
		}
	})
	return sock
}

// publicDir is a temporary directory that uid 65534 can traverse.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandtrail-ingest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// roundTrip sends one raw payload on a fresh connection and returns the
// reply.
func roundTrip(t *testing.T, sock string, payload []byte) *ingest.Reply {
	t.Helper()
	rep, err := tryRoundTrip(sock, payload)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func tryRoundTrip(sock string, payload []byte) (*ingest.Reply, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// A server that refuses the connection (busy) replies and closes
	// without reading the request, so the write may fail with EPIPE: the
	// reply is read all the same.
	werr := ingest.WriteFrame(c, payload)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := ingest.ReadFrame(c, ingest.MaxFrame)
	if err != nil {
		if werr != nil {
			return nil, werr
		}
		return nil, fmt.Errorf("reading reply: %w", err)
	}
	return ingest.DecodeReply(b)
}

// request encodes raw JSON events into a request payload.
func request(events ...string) []byte {
	return []byte(`{"v":1,"events":[` + strings.Join(events, ",") + `]}`)
}

// child is a client-role process.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startChild runs the test binary as a client of sock, configured by attr.
func startChild(t *testing.T, exe, sock string, attr *syscall.SysProcAttr) *child {
	t.Helper()
	return startRole(t, exe, "client", sock, attr)
}

// startRole runs the test binary in role, with sock, configured by attr.
func startRole(t *testing.T, exe, role, sock string, attr *syscall.SysProcAttr) *child {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"="+role, envSock+"="+sock)
	cmd.SysProcAttr = attr
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting client process: %v", err)
	}
	ch := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	ch.out.Buffer(nil, 4<<20)
	t.Cleanup(ch.stop)
	return ch
}

// send sends one request line and returns the reply.
func (c *child) send(t *testing.T, payload []byte) *ingest.Reply {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, "%s\n", payload); err != nil {
		t.Fatal(err)
	}
	if !c.out.Scan() {
		t.Fatalf("client process gave no reply: %v", c.out.Err())
	}
	rep, err := ingest.DecodeReply(c.out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (c *child) stop() {
	if c.in != nil {
		c.in.Close()
		c.in = nil
		_ = c.cmd.Wait()
	}
}

// do sends one command line to a hold-role process and returns its answer.
func (c *child) do(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		t.Fatal(err)
	}
	if !c.out.Scan() {
		t.Fatalf("hold process gave no answer to %q: %v", cmd, c.out.Err())
	}
	return c.out.Text()
}
