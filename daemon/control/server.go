package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
)

// Daemon is what the server needs of the daemon that runs the sessions.
type Daemon interface {
	launch.Daemon
	// Session returns the session with the id, if the daemon has it.
	Session(id string) (*session.Session, bool)
	// WatchAlerts calls fn with each alert raised in the session until
	// cancel; fn must not block.
	WatchAlerts(session string, fn func(*event.Event)) (cancel func())
	// Sync makes every event so far durable and covered by a signed
	// checkpoint, so that a client can read its session back and verify
	// it.
	Sync(ctx context.Context) error
}

// Server serves the control socket for a Daemon.
type Server struct {
	d   Daemon
	ids *attribution.Attributor
	log hclog.Logger
	ln  *net.UnixListener
	// ctx ends with the server: sessions run by run requests end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*ctlSession
	wg       sync.WaitGroup
}

// Listen creates the control socket at path, 0600, refusing one that
// another process still serves.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating control socket directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s is in use by another daemon", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale control socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting control socket: %w", err)
	}
	return ln, nil
}

// Serve serves ln (from Listen) for d until Close.
func Serve(ln *net.UnixListener, d Daemon, ids *attribution.Attributor, log hclog.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Server{d: d, ids: ids, log: log.Named("control"), ln: ln, ctx: ctx, cancel: cancel, sessions: map[string]*ctlSession{}}
	c.wg.Add(1)
	go c.serve()
	return c
}

func (c *Server) serve() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Error("accepting control connection", "error", err)
			}
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			c.handle(conn)
		}()
	}
}

// Close stops accepting, terminates the sessions that are still running
// (reason signal) and cleans up every session not cleaned up yet, keeping
// its directory.
func (c *Server) Close() error {
	err := c.ln.Close()
	c.cancel()
	c.mu.Lock()
	var left []*ctlSession
	for _, cs := range c.sessions {
		left = append(left, cs)
	}
	c.mu.Unlock()
	ctx := context.Background()
	for _, cs := range left {
		_ = cs.s.Terminate(ctx, session.ReasonSignal, nil)
	}
	c.wg.Wait()
	for _, cs := range left {
		c.mu.Lock()
		cleaned := cs.cleaned
		cs.cleaned = true
		c.mu.Unlock()
		if !cleaned {
			if cerr := c.d.CleanupSession(ctx, cs.s, session.FSPreserved); cerr != nil {
				c.log.Warn("cleaning up session at shutdown", "session_id", cs.s.ID(), "error", cerr)
			}
		}
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// ActorName names a uid for the record: "root (uid 0)".
func ActorName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}

// call is one request being served.
type call struct {
	conn  *net.UnixConn
	req   Request
	actor string
	uid   uint32 // the peer's, from SO_PEERCRED
	files []*os.File
	// rest is what follows the request on the connection.
	rest io.Reader
	mu   sync.Mutex // enc: a run's alerts are written beside its replies
	enc  *json.Encoder
}

func (k *call) reply(r Response) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_ = k.enc.Encode(r)
}

func (k *call) fail(err error) { k.reply(Response{Error: err.Error()}) }

func (c *Server) handle(conn *net.UnixConn) {
	k := &call{conn: conn, enc: json.NewEncoder(conn)}
	defer func() {
		for _, f := range k.files {
			f.Close()
		}
	}()
	if !c.admit(k) {
		return
	}
	if err := c.read(k); err != nil {
		k.fail(err)
		return
	}
	c.log.Debug("control request", "op", k.req.Op, "session_id", k.req.Session, "actor", k.actor)
	if op, ok := hostOps[k.req.Op]; ok {
		op(c, k)
		return
	}
	op, ok := sessionOps[k.req.Op]
	if !ok {
		k.fail(fmt.Errorf("unknown op %q", k.req.Op))
		return
	}
	c.mu.Lock()
	cs, found := c.sessions[k.req.Session]
	c.mu.Unlock()
	if !found {
		k.fail(fmt.Errorf("%s: no session %q in this daemon", k.req.Op, k.req.Session))
		return
	}
	if err := op(c, k, cs); err != nil {
		k.fail(err)
		return
	}
	c.replySession(k, cs)
}

// admit checks the peer's credentials: only root outside every session
// may use the socket.
func (c *Server) admit(k *call) bool {
	cr, err := peercred.Read(k.conn, false)
	if err != nil {
		c.log.Warn("reading control peer credentials", "error", err)
		return false
	}
	if cr.UID != 0 {
		c.log.Warn("control connection refused", "uid", cr.UID)
		k.fail(errors.New("permission denied: only root may use the control socket"))
		return false
	}
	// Root inside a session (an apt maintainer script the broker runs,
	// a session started as root) is the agent's, not the operator's.
	at, err := c.ids.Unix(k.conn)
	if err != nil {
		c.log.Warn("control connection refused: cannot attribute the caller", "pid", cr.Pid, "error", err)
		k.fail(fmt.Errorf("permission denied: cannot attribute the caller: %w", err))
		return false
	}
	if at.Session != "" {
		c.log.Warn("control connection refused: the caller is in a session", "pid", at.Pid, "session_id", at.Session)
		k.fail(fmt.Errorf("permission denied: a process of session %s may not use the control socket", at.Session))
		return false
	}
	k.actor, k.uid = ActorName(cr.UID), cr.UID
	return true
}

// read reads the request and the descriptors that came with its first
// byte.
func (c *Server) read(k *call) error {
	_ = k.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := k.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return fmt.Errorf("reading request: %w", err)
	}
	if k.files, err = receivedFiles(oob[:oobn]); err != nil {
		return err
	}
	rd := bufio.NewReader(io.LimitReader(io.MultiReader(bytes.NewReader(buf[:n]), k.conn), maxRequest))
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k.req); err != nil {
		return fmt.Errorf("decoding request: %w", err)
	}
	_ = k.conn.SetReadDeadline(time.Time{})
	k.rest = io.MultiReader(dec.Buffered(), rd)
	return nil
}

// receivedFiles turns the SCM_RIGHTS descriptors in oob into files.
func receivedFiles(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parsing control message: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
		}
	}
	if len(files) > 3 {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("request carries %d descriptors, want at most 3", len(files))
	}
	return files, nil
}

// replySession answers with cs's info.
func (c *Server) replySession(k *call, cs *ctlSession) {
	c.mu.Lock()
	info := cs.info()
	c.mu.Unlock()
	k.reply(Response{OK: true, Session: &info})
}
