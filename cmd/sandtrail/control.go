package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/record/event"
)

// The control socket lets root drive the daemon's sessions: `sandtrail
// session …` and `sandtrail run` when a daemon is running, so that one
// journal has one writer.
//
// Protocol: one request per connection. The client writes one JSON
// controlRequest; the server answers with JSON controlResponse lines: one
// for every op but run, which gets a first line once the session exists
// (with its id) and a last one with the result. A run request carries the
// client's stdin, stdout and stderr as SCM_RIGHTS descriptors with its
// first byte; the daemon gives them to the command, so its I/O never passes
// through the daemon. Closing a run connection before the result
// terminates the session (reason signal).
//
// Trust model: the socket is 0600 root and beneath /run/sandtrail; the
// server also checks SO_PEERCRED and refuses any peer whose uid is not 0.
// The actor recorded for pause and resume is the peer's user name and uid.

// controlSocketPath is the control socket: control.sock beside the ingest
// socket (/run/sandtrail/control.sock by default).
func controlSocketPath(cfg *Config) string {
	return filepath.Join(filepath.Dir(cfg.Socket), "control.sock")
}

// errNoDaemon is returned when no daemon serves the control socket.
var errNoDaemon = errors.New("no sandtrail daemon is running (its control socket is absent or refuses connections)")

const maxControlRequest = 4 << 20

type controlRequest struct {
	// Op is create, start, pause, resume, stop, cleanup, list, show or run.
	Op      string `json:"op"`
	Session string `json:"session,omitempty"`
	// Reason is the pause reason (api, timeout, auto) or the stop reason.
	Reason string `json:"reason,omitempty"`
	// Keep is the cleanup's fs state.
	Keep string          `json:"keep,omitempty"`
	Spec *sessionRequest `json:"spec,omitempty"`
}

type controlResponse struct {
	OK       bool          `json:"ok"`
	Error    string        `json:"error,omitempty"`
	Session  *sessionInfo  `json:"session,omitempty"`
	Sessions []sessionInfo `json:"sessions,omitempty"`
	Result   *runResult    `json:"result,omitempty"`
}

// sessionInfo is what list and show say about a session.
type sessionInfo struct {
	ID         string       `json:"id"`
	State      string       `json:"state"`
	User       string       `json:"user,omitempty"`
	Tenant     string       `json:"tenant,omitempty"`
	Template   string       `json:"template,omitempty"`
	Image      string       `json:"image,omitempty"`
	Limits     event.Limits `json:"limits"`
	CgroupID   uint64       `json:"cgroup_id"`
	CgroupPath string       `json:"cgroup_path,omitempty"`
	Dir        string       `json:"dir"`
	Workdir    string       `json:"workdir"`
	Argv       []string     `json:"argv,omitempty"`
	Created    time.Time    `json:"created"`
	Started    time.Time    `json:"started,omitzero"`
	Reason     string       `json:"reason,omitempty"`
	ExitStatus *int32       `json:"exit_status,omitempty"`
}

// ctlSession is a session the daemon knows.
type ctlSession struct {
	s       *session.Session
	created time.Time
	started time.Time
	argv    []string
	paused  bool
	cleaned bool
}

func (c *ctlSession) info() sessionInfo {
	sp := c.s.Spec()
	in := sessionInfo{ID: sp.ID, User: sp.User, Tenant: sp.Tenant, Template: sp.Template, Image: sp.Image,
		Limits: sp.Limits, CgroupID: c.s.CgroupID(), CgroupPath: c.s.CgroupPath(), Workdir: c.s.Workdir(),
		Dir: filepath.Dir(c.s.Workdir()), Argv: c.argv, Created: c.created, Started: c.started}
	select {
	case <-c.s.Done():
		in.Reason, in.ExitStatus = c.s.Result()
		in.State = "terminated"
		if c.cleaned {
			in.State, in.CgroupPath = "cleaned", ""
		}
	default:
		switch {
		case c.paused:
			in.State = "paused"
		case !c.started.IsZero():
			in.State = "running"
		default:
			in.State = "created"
		}
	}
	return in
}

// controlServer serves the control socket for a host.
type controlServer struct {
	h    *host
	log  hclog.Logger
	path string
	ln   *net.UnixListener
	// ctx ends with the daemon: sessions run by run requests end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*ctlSession
	wg       sync.WaitGroup
}

// listenControl creates the control socket at path, 0600, refusing one
// that another process still serves.
func listenControl(path string) (*net.UnixListener, error) {
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

// startControl serves the control socket of cfg for h until Close.
func startControl(h *host, log hclog.Logger) (*controlServer, error) {
	path := controlSocketPath(h.cfg)
	ln, err := listenControl(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &controlServer{h: h, log: log.Named("control"), path: path, ln: ln, ctx: ctx, cancel: cancel,
		sessions: map[string]*ctlSession{}}
	c.wg.Add(1)
	go c.serve()
	return c, nil
}

func (c *controlServer) serve() {
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

// Close stops accepting, terminates the daemon's sessions that are still
// running (reason signal) and cleans up every session not cleaned up yet,
// keeping its directory.
func (c *controlServer) Close() error {
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
			if cerr := c.h.cleanupSession(ctx, cs.s, session.FSPreserved); cerr != nil {
				c.log.Warn("cleaning up session at shutdown", "session_id", cs.s.ID(), "error", cerr)
			}
		}
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// peer returns the uid of the connection's peer.
func peerUID(conn *net.UnixConn) (uint32, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var uerr error
	if err := rc.Control(func(fd uintptr) {
		cred, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if uerr != nil {
		return 0, uerr
	}
	return cred.Uid, nil
}

// actorName names a uid for the record: "root (uid 0)".
func actorName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}

func (c *controlServer) handle(conn *net.UnixConn) {
	enc := json.NewEncoder(conn)
	reply := func(r controlResponse) { _ = enc.Encode(r) }
	fail := func(err error) { reply(controlResponse{Error: err.Error()}) }
	uid, err := peerUID(conn)
	if err != nil {
		c.log.Warn("reading control peer credentials", "error", err)
		return
	}
	if uid != 0 {
		c.log.Warn("control connection refused", "uid", uid)
		fail(errors.New("permission denied: only root may use the control socket"))
		return
	}
	actor := actorName(uid)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	files, err := receivedFiles(oob[:oobn])
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		fail(err)
		return
	}
	rd := bufio.NewReader(io.LimitReader(io.MultiReader(bytes.NewReader(buf[:n]), conn), maxControlRequest))
	var req controlRequest
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(fmt.Errorf("decoding request: %w", err))
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	c.log.Debug("control request", "op", req.Op, "session_id", req.Session, "actor", actor)
	ctx := c.ctx
	switch req.Op {
	case "run":
		if len(files) != 3 {
			fail(fmt.Errorf("run: want stdin, stdout and stderr descriptors, got %d", len(files)))
			return
		}
		c.run(ctx, conn, io.MultiReader(dec.Buffered(), rd), &req, [3]*os.File(files), reply)
		return
	case "list":
		c.mu.Lock()
		var out []sessionInfo
		for _, cs := range c.sessions {
			out = append(out, cs.info())
		}
		c.mu.Unlock()
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		reply(controlResponse{OK: true, Sessions: out})
		return
	case "create":
		if req.Spec == nil {
			fail(errors.New("create: no spec"))
			return
		}
		acct, err := lookupAccount(req.Spec.User)
		if err != nil {
			fail(err)
			return
		}
		s, err := c.h.createSession(ctx, session.Spec{ID: req.Spec.ID, Tenant: req.Spec.Tenant, User: acct.Name,
			Template: req.Spec.Template, Image: req.Spec.Image, Limits: req.Spec.Limits})
		if err != nil {
			fail(err)
			return
		}
		cs := &ctlSession{s: s, created: time.Now()}
		c.mu.Lock()
		c.sessions[s.ID()] = cs
		info := cs.info()
		c.mu.Unlock()
		reply(controlResponse{OK: true, Session: &info})
		return
	}
	c.mu.Lock()
	cs, ok := c.sessions[req.Session]
	c.mu.Unlock()
	if !ok {
		fail(fmt.Errorf("%s: no session %q in this daemon", req.Op, req.Session))
		return
	}
	var opErr error
	switch req.Op {
	case "show":
	case "start":
		opErr = c.start(ctx, cs, req.Spec)
	case "pause":
		reason := req.Reason
		if reason == "" {
			reason = session.PauseAPI
		}
		if reason != session.PauseAPI && reason != session.PauseTimeout && reason != session.PauseAuto {
			opErr = fmt.Errorf("pause: reason %q: want api, timeout or auto", reason)
			break
		}
		if opErr = cs.s.Pause(ctx, reason, actor); opErr == nil {
			c.setPaused(cs, true)
		}
	case "resume":
		if opErr = cs.s.Resume(ctx, actor); opErr == nil {
			c.setPaused(cs, false)
		}
	case "stop":
		reason := req.Reason
		if reason == "" {
			reason = session.ReasonAPI
		}
		opErr = cs.s.Terminate(ctx, reason, nil)
	case "cleanup":
		keep, err := checkKeep(req.Keep)
		if err != nil {
			opErr = err
			break
		}
		if opErr = c.h.cleanupSession(ctx, cs.s, keep); opErr == nil {
			c.markCleaned(cs)
		}
	default:
		opErr = fmt.Errorf("unknown op %q", req.Op)
	}
	if opErr != nil {
		fail(opErr)
		return
	}
	c.mu.Lock()
	info := cs.info()
	c.mu.Unlock()
	reply(controlResponse{OK: true, Session: &info})
}

// keepCleaned is how many cleaned-up sessions list and show still know.
const keepCleaned = 256

// markCleaned records that cs was cleaned up, and forgets the oldest
// cleaned-up sessions beyond keepCleaned (the record keeps them all).
func (c *controlServer) markCleaned(cs *ctlSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs.cleaned = true
	var cleaned []*ctlSession
	for _, x := range c.sessions {
		if x.cleaned {
			cleaned = append(cleaned, x)
		}
	}
	if len(cleaned) <= keepCleaned {
		return
	}
	sort.Slice(cleaned, func(i, j int) bool { return cleaned[i].created.Before(cleaned[j].created) })
	for _, x := range cleaned[:len(cleaned)-keepCleaned] {
		delete(c.sessions, x.s.ID())
	}
}

func (c *controlServer) setPaused(cs *ctlSession, p bool) {
	c.mu.Lock()
	cs.paused = p
	c.mu.Unlock()
}

// start runs a command in a created session, detached: stdin is
// /dev/null, stdout and stderr go to stdout.log and stderr.log in the
// session's directory.
func (c *controlServer) start(ctx context.Context, cs *ctlSession, spec *sessionRequest) error {
	if spec == nil || len(spec.Argv) == 0 {
		return errors.New("start: no command given")
	}
	if spec.User == "" {
		spec.User = cs.s.Spec().User
	}
	acct, err := lookupAccount(spec.User)
	if err != nil {
		return err
	}
	dir := filepath.Dir(cs.s.Workdir())
	var files [3]*os.File
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	if files[0], err = os.Open(os.DevNull); err != nil {
		return err
	}
	for i, name := range []string{"stdout.log", "stderr.log"} {
		if files[i+1], err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600); err != nil {
			closeAll()
			return fmt.Errorf("opening session log: %w", err)
		}
	}
	cmd, err := prepareCommand(cs.s, spec, acct, files)
	if err == nil {
		err = cs.s.Start(ctx, cmd)
	}
	if err != nil {
		closeAll()
		return err
	}
	c.mu.Lock()
	cs.started, cs.argv = time.Now(), spec.Argv
	c.mu.Unlock()
	go func() {
		<-cs.s.Done()
		closeAll()
	}()
	return nil
}

// run runs a session for a `sandtrail run` client: the first reply names
// the session, the last one says how it ended. The session ends with
// reason signal when the client goes away first.
func (c *controlServer) run(ctx context.Context, conn *net.UnixConn, rest io.Reader, req *controlRequest, stdio [3]*os.File, reply func(controlResponse)) {
	if req.Spec == nil {
		reply(controlResponse{Error: "run: no spec"})
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The client sends nothing more; EOF means it is gone.
		_, _ = io.Copy(io.Discard, rest)
		cancel()
	}()
	var cs *ctlSession
	res, err := c.h.runInSession(ctx, req.Spec, stdio, func(id string) {
		s, _ := c.h.mgr.Get(id)
		cs = &ctlSession{s: s, created: time.Now(), started: time.Now(), argv: req.Spec.Argv}
		c.mu.Lock()
		c.sessions[id] = cs
		c.mu.Unlock()
		info := cs.info()
		reply(controlResponse{OK: true, Session: &info})
	})
	if cs != nil {
		c.markCleaned(cs)
	}
	if err == nil {
		// The client reads its session back and verifies the journal:
		// make the session's events durable and signed first.
		if err = c.h.flush(c.ctx); err == nil {
			_, err = c.h.j.Checkpoint(c.ctx)
		}
	}
	if err != nil && res == nil {
		reply(controlResponse{Error: err.Error()})
		return
	}
	r := controlResponse{OK: err == nil, Result: res}
	if err != nil {
		r.Error = err.Error()
	}
	reply(r)
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

// controlDial connects to the daemon's control socket; errNoDaemon when
// there is none.
func controlDial(path string) (*net.UnixConn, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoDaemon
		}
		return nil, fmt.Errorf("connecting to the daemon's control socket %s: %w", path, err)
	}
	return conn, nil
}

// controlSend writes req, with files as SCM_RIGHTS.
func controlSend(conn *net.UnixConn, req *controlRequest, files []*os.File) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	b = append(b, '\n')
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	// The descriptors go with the first byte; the rest follows.
	if _, _, err := conn.WriteMsgUnix(b[:1], oob, nil); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	if _, err := conn.Write(b[1:]); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	return nil
}

// controlCall sends one request and reads its one response.
func controlCall(path string, req *controlRequest) (*controlResponse, error) {
	conn, err := controlDial(path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := controlSend(conn, req, nil); err != nil {
		return nil, err
	}
	var resp controlResponse
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return nil, fmt.Errorf("reading the daemon's response: %w", err)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("daemon: %s", resp.Error)
	}
	return &resp, nil
}
