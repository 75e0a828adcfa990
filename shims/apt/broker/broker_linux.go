package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt"
)

// Config configures a Broker.
type Config struct {
	// AptGet is apt-get's path (default /usr/bin/apt-get).
	AptGet string
	// Mirror is the mirror's base URL, apt's HTTP proxy; empty: none.
	Mirror string
	// Check asks the policy about the requests of a session; blocked
	// refuses the install, with the rule and a message for the agent.
	// Nil allows everything.
	Check func(ctx context.Context, session string, reqs []shims.Request) (blocked bool, rule, message string)
	// Emit receives the pkg.install and pkg.blocked events.
	Emit func(*event.Event)
	// Attributor is the daemon's one attribution step (kernel/attribution):
	// the broker takes the peer's identity when it connects and asks for
	// its session once its request has arrived. A peer that cannot be
	// attributed (its process exited and its pid may name another) or
	// that is in no session is refused. Nil: every peer, with no session.
	Attributor *attribution.Attributor
	// Nest makes the cgroup that a session's request runs apt-get in: one
	// nested in the session's v2 cgroup (collector/session's
	// Session.NewNested), so that the kernel records apt-get, dpkg and
	// the maintainer scripts in the session, and the mirror attributes
	// apt's fetches to it. An error refuses the request. Nil, or a peer in
	// no session: apt-get runs in the broker's own cgroup.
	Nest func(session string) (Cgroup, error)
	// HookCmd is the hook's command line; the broker appends the output
	// file ("/usr/local/bin/sandtrail-shim apt-hook"). Its first word
	// names apt's DPkg::Tools::Options section.
	HookCmd string
	// Env is added to apt-get's built environment (APT_CONFIG for a
	// scratch apt, say).
	Env []string
	// DpkgStatus is dpkg's status file, read after an install to say what
	// it installed (default DefaultDpkgStatus; a scratch apt's dpkg root
	// has its own).
	DpkgStatus string
	// Host names the machine in the events.
	Host string
	Log  hclog.Logger
}

// Cgroup is a cgroup that apt-get is started in (CLONE_INTO_CGROUP), held
// for one request.
type Cgroup interface {
	// FD is an open descriptor of the cgroup's directory.
	FD() int
	// Close removes the cgroup; it may fail while processes that apt-get
	// left behind run in it.
	Close() error
}

// Broker serves apt installs on a unix socket.
type Broker struct {
	cfg Config
	log hclog.Logger
	// ids takes each peer's identity: cfg.Attributor, or, without one,
	// an Attributor over no sessions.
	ids  *attribution.Attributor
	mu   sync.Mutex
	lns  []*net.UnixListener
	wg   sync.WaitGroup
	done chan struct{}
}

// New returns a broker; HookCmd is required.
func New(cfg Config) (*Broker, error) {
	if cfg.HookCmd == "" {
		return nil, errors.New("broker: no hook command")
	}
	if cfg.AptGet == "" {
		cfg.AptGet = "/usr/bin/apt-get"
	}
	if cfg.DpkgStatus == "" {
		cfg.DpkgStatus = DefaultDpkgStatus
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Emit == nil {
		cfg.Emit = func(*event.Event) {}
	}
	ids := cfg.Attributor
	if ids == nil {
		ids = attribution.New(noSessions{})
	}
	return &Broker{cfg: cfg, log: cfg.Log.Named("apt_broker"), ids: ids, done: make(chan struct{})}, nil
}

// Serve accepts clients on ln until Close.
func (b *Broker) Serve(ln *net.UnixListener) error {
	b.mu.Lock()
	b.lns = append(b.lns, ln)
	b.mu.Unlock()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			select {
			case <-b.done:
				return nil
			default:
				return fmt.Errorf("accepting apt broker clients: %w", err)
			}
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer c.Close()
			b.serveConn(c)
		}()
	}
}

// Close stops accepting and waits for the running installs.
func (b *Broker) Close() error {
	b.mu.Lock()
	select {
	case <-b.done:
	default:
		close(b.done)
	}
	for _, ln := range b.lns {
		ln.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}

// peer is a client.
type peer struct {
	attribution.Attribution
	// cgroupFD is the cgroup the request's apt-get runs in, -1 for the
	// broker's own.
	cgroupFD int
}

// serveConn serves one request.
func (b *Broker) serveConn(c *net.UnixConn) {
	ap, err := b.ids.Open(c)
	if err != nil {
		b.reply(c, apt.BrokerReply{Exit: 100, Refused: true, Message: "cannot read the peer's credentials"})
		return
	}
	defer ap.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, fds, err := readRequest(c)
	c.SetReadDeadline(time.Time{})
	defer closeAll(fds)
	if err != nil {
		b.reply(c, apt.BrokerReply{Exit: 100, Refused: true, Message: err.Error()})
		return
	}
	p := peer{Attribution: attribution.Attribution{Pid: ap.Pid, UID: ap.UID}, cgroupFD: -1}
	if b.cfg.Attributor != nil {
		if p.Attribution, err = b.cfg.Attributor.Attribute(ap); err != nil {
			b.log.Info("request refused", "pid", ap.Pid, "reason", "cannot attribute the peer", "error", err)
			b.reply(c, apt.BrokerReply{Exit: 100, Refused: true, Message: "cannot attribute the caller: " + err.Error()})
			return
		}
		if p.Session == "" {
			b.reply(c, apt.BrokerReply{Exit: 100, Refused: true, Message: "the caller is in no session"})
			return
		}
	}
	b.reply(c, b.handle(c, p, req, fds))
}

// noSessions is the session table of a broker without an Attributor.
type noSessions struct{}

func (noSessions) Lookup(uint64) (string, bool) { return "", false }

func (b *Broker) reply(c *net.UnixConn, rep apt.BrokerReply) {
	body, _ := json.Marshal(rep)
	if err := apt.WriteFrame(c, body); err != nil {
		b.log.Debug("reply failed", "error", err)
	}
}

// readRequest reads the request frame and the three fds passed with it.
func readRequest(c *net.UnixConn) (apt.BrokerRequest, []int, error) {
	var req apt.BrokerRequest
	buf := make([]byte, apt.MaxBrokerFrame+4)
	oob := make([]byte, syscall.CmsgSpace(16*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return req, nil, fmt.Errorf("reading the request: %w", err)
	}
	var fds []int
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if f, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 || len(fds) != 3 {
		return req, fds, fmt.Errorf("the request must pass exactly stdin, stdout and stderr")
	}
	body, err := apt.SplitFrame(c, buf[:n])
	if err != nil {
		return req, fds, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fds, fmt.Errorf("decoding the request: %w", err)
	}
	return req, fds, nil
}

// dupFile is a file of its own for the received descriptor fd, which
// closeAll closes: an *os.File of fd itself would close fd's number again
// when its finalizer ran, after closeAll, by when the number may be
// another file's (another request's descriptor, a peer's pidfd).
func dupFile(fd int, name string) (*os.File, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicating the client's %s: %w", name, err)
	}
	return os.NewFile(uintptr(d), name), nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// handle validates, checks and runs one request.
func (b *Broker) handle(c *net.UnixConn, p peer, req apt.BrokerRequest, fds []int) apt.BrokerReply {
	cmd, argv, err := Validate(req.Args)
	if err != nil {
		b.log.Info("request refused", "pid", p.Pid, "reason", err.Error())
		return apt.BrokerReply{Exit: 100, Refused: true, Message: err.Error()}
	}
	parsed := apt.ParseArgs(argv)
	var reqs []shims.Request
	if cmd != "update" {
		reqs = apt.Requests(parsed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watch(c, cancel)
	if b.cfg.Check != nil && len(reqs) > 0 {
		if blocked, rule, msg := b.cfg.Check(ctx, p.Session, reqs); blocked {
			b.emitBlocked(p, reqs, rule, msg)
			return apt.BrokerReply{Exit: 100, Refused: true, Message: msg}
		}
	}
	if b.cfg.Nest != nil && p.Session != "" {
		cg, err := b.cfg.Nest(p.Session)
		if err != nil {
			b.log.Warn("making the session's apt cgroup failed", "session", p.Session, "error", err)
			return apt.BrokerReply{Exit: 100, Refused: true, Message: "broker: cannot run apt-get in the session: " + err.Error()}
		}
		defer func() {
			if err := cg.Close(); err != nil {
				b.log.Info("the session's apt cgroup stays until the session ends", "session", p.Session, "error", err)
			}
		}()
		p.cgroupFD = cg.FD()
	}
	tmp, err := os.MkdirTemp("", "sandtrail-apt-")
	if err != nil {
		return apt.BrokerReply{Exit: 100, Refused: true, Message: "broker: cannot make a temporary directory"}
	}
	defer os.RemoveAll(tmp)
	var uris []apt.URI
	if cmd != "update" {
		var rep *apt.BrokerReply
		if uris, rep = b.checkURIs(ctx, p, argv, req, fds, tmp); rep != nil {
			return *rep
		}
	}
	out := filepath.Join(tmp, "hook.jsonl")
	exit, pid, err := b.run(ctx, p, b.installArgs(argv, out), req, fds)
	if err != nil {
		return apt.BrokerReply{Exit: 100, Refused: true, Message: "broker: " + err.Error()}
	}
	if cmd != "update" {
		b.emitInstalls(p, reqs, uris, out, pid)
	}
	return apt.BrokerReply{Exit: exit}
}

// watch cancels when the client's connection closes (it sends nothing
// after its request, so any read returning means it is gone).
func watch(c *net.UnixConn, cancel func()) {
	var b [1]byte
	c.Read(b[:])
	cancel()
}

// baseArgs are the options every apt-get run gets.
func (b *Broker) baseArgs() []string {
	a := []string{"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	if b.cfg.Mirror != "" {
		a = append(a, "-o", "Acquire::http::Proxy="+strings.TrimSuffix(b.cfg.Mirror, "/")+"/")
	}
	return a
}

// installArgs adds the hook writing to out.
func (b *Broker) installArgs(argv []string, out string) []string {
	hook := b.cfg.HookCmd + " " + out
	section, _, _ := strings.Cut(b.cfg.HookCmd, " ")
	a := append(b.baseArgs(), "-o", "DPkg::Pre-Install-Pkgs::="+hook, "-o", "DPkg::Tools::Options::"+section+"::Version=3")
	return append(a, argv...)
}

// checkURIs asks apt-get what the install would fetch and the policy
// about each package of it, dependencies included: apt-get reads a name
// that matches no package as a regular expression or a glob
// ("netcat-traditiona."), so argv's names are not what it installs. A
// non-nil reply ends the request: apt's own failure (its exit code and
// its stderr, passed on) or the policy's refusal.
func (b *Broker) checkURIs(ctx context.Context, p peer, argv []string, req apt.BrokerRequest, fds []int, tmp string) ([]apt.URI, *apt.BrokerReply) {
	uris, exit, stderr, err := b.printURIs(ctx, p, argv, req, tmp)
	if err != nil {
		b.log.Warn("print-uris failed", "error", err)
		return nil, &apt.BrokerReply{Exit: 100, Refused: true, Message: "broker: cannot list what apt-get would install: " + err.Error()}
	}
	if exit != 0 {
		syscall.Write(fds[2], stderr)
		return nil, &apt.BrokerReply{Exit: exit}
	}
	reqs := uriRequests(uris)
	if b.cfg.Check != nil && len(reqs) > 0 {
		if blocked, rule, msg := b.cfg.Check(ctx, p.Session, reqs); blocked {
			b.emitBlocked(p, reqs, rule, msg)
			return nil, &apt.BrokerReply{Exit: 100, Refused: true, Message: msg}
		}
	}
	return uris, nil
}

// printURIs asks apt-get what it would fetch, with hashes, with an empty
// archive cache of its own under tmp (so that a package already in the
// cache is listed too). A failure of apt-get's own is its exit code and
// stderr; err is for not running or reading it.
func (b *Broker) printURIs(ctx context.Context, p peer, argv []string, req apt.BrokerRequest, tmp string) ([]apt.URI, int, []byte, error) {
	archives := filepath.Join(tmp, "archives")
	if err := os.MkdirAll(filepath.Join(archives, "partial"), 0o700); err != nil {
		return nil, 0, nil, fmt.Errorf("making an archive cache for --print-uris: %w", err)
	}
	a := append(b.baseArgs(), "--print-uris", "-qq", "-o", "Acquire::ForceHash=sha256", "-o", "Dir::Cache::Archives="+archives+"/")
	cmd := exec.CommandContext(ctx, b.cfg.AptGet, append(a, argv...)...)
	cmd.Env, cmd.Dir = b.env(req), "/"
	cmd.SysProcAttr = p.procAttr(false)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return nil, ee.ExitCode(), stderr.Bytes(), nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("running apt-get --print-uris: %w", err)
	}
	uris, err := apt.PrintURIs(out)
	return uris, 0, nil, err
}

var (
	termRe = regexp.MustCompile(`^[A-Za-z0-9.+_-]{1,64}$`)
	langRe = regexp.MustCompile(`^[A-Za-z_]{1,16}(\.[A-Za-z0-9-]{1,16})?(@[A-Za-z]{1,16})?$`)
)

// env builds apt-get's environment.
func (b *Broker) env(req apt.BrokerRequest) []string {
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive",
		"APT_LISTCHANGES_FRONTEND=none", "APT_LISTBUGS_FRONTEND=none", "PAGER=cat", "LANG=C.UTF-8"}
	if langRe.MatchString(req.Lang) {
		env[len(env)-1] = "LANG=" + req.Lang
	}
	if termRe.MatchString(req.Term) {
		env = append(env, "TERM="+req.Term)
	}
	return append(env, b.cfg.Env...)
}

// procAttr starts apt-get in the peer's cgroup, if it has one, and, with
// pgid, in a process group of its own.
func (p peer) procAttr(pgid bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: pgid}
	if p.cgroupFD >= 0 {
		a.UseCgroupFD, a.CgroupFD = true, p.cgroupFD
	}
	return a
}

// run runs apt-get with the client's stdout and stderr, stdin /dev/null,
// in the peer's cgroup and a process group of its own that is stopped
// when ctx ends.
func (b *Broker) run(ctx context.Context, p peer, args []string, req apt.BrokerRequest, fds []int) (int, int32, error) {
	stdout, err := dupFile(fds[1], "stdout")
	if err != nil {
		return 0, 0, err
	}
	defer stdout.Close()
	stderr, err := dupFile(fds[2], "stderr")
	if err != nil {
		return 0, 0, err
	}
	defer stderr.Close()
	cmd := exec.CommandContext(ctx, b.cfg.AptGet, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = b.env(req), stdout, stderr, "/"
	cmd.SysProcAttr = p.procAttr(true)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("starting apt-get: %w", err)
	}
	pid := int32(cmd.Process.Pid)
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, pid, nil
	case errors.As(err, &ee):
		if code := ee.ExitCode(); code >= 0 {
			return code, pid, nil
		}
		return 100, pid, nil
	}
	return 0, pid, fmt.Errorf("running apt-get: %w", err)
}
