package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/record/event"
)

// Errors returned by the Manager and Session methods.
var (
	ErrNotSupported          = errors.New("session: not supported on this platform")
	ErrInvalidSpec           = errors.New("session: invalid spec")
	ErrExists                = errors.New("session: already exists")
	ErrControllerUnavailable = errors.New("session: cgroup controller unavailable")
	ErrEscaped               = errors.New("session: process is not in the session cgroups")
	ErrState                 = errors.New("session: wrong state for this operation")
	ErrNoUID                 = errors.New("session: no session uid free")
)

// The reasons and states written into session events.
const (
	PauseAPI     = "api"
	PauseTimeout = "timeout"
	PauseAuto    = "auto"

	ReasonNormal          = "normal"
	ReasonTimeout         = "timeout"
	ReasonOOM             = "oom"
	ReasonAPI             = "api"
	ReasonPolicyViolation = "policy_violation"
	ReasonSignal          = "signal"
	// ReasonHostLost ends a session whose host died without ending it
	// (Manager.Abandoned): a later host kills what is left of it.
	ReasonHostLost = "host_lost"

	FSPreserved = "preserved"
	FSDeleted   = "deleted"
	FSSnapshot  = "snapshot"
)

// DefaultRoot is where session directories are made unless WithRoot says
// otherwise.
const DefaultRoot = "/var/lib/sandtrail/sessions"

// UIDRange is a range of uids reserved for sessions: Count uids from First.
// No account of the machine may have one, and no range of /etc/subuid may
// overlap it.
type UIDRange struct {
	First, Count uint32
}

// DefaultUIDRange is the range a session's own uid is taken from unless
// WithUIDRange says otherwise: 0x5a000000 (1509949440) and the 65535 uids
// after it, far above the accounts and the /etc/subuid ranges that useradd
// hands out.
var DefaultUIDRange = UIDRange{First: 0x5a000000, Count: 65536}

// contains reports whether uid is in r.
func (r UIDRange) contains(uid uint32) bool {
	return uid >= r.First && uid-r.First < r.Count
}

// Manager creates sessions and watches their limits. It is safe for
// concurrent use.
//
// Trust model: the manager runs as root, outside every session. Processes
// in a session are untrusted: they cannot leave the session's cgroups
// (which are created beneath the manager's own, and joined before the
// process runs), so attribution by cgroup id is the kernel's, not theirs.
type Manager struct {
	log    hclog.Logger
	emit   func(*event.Event)
	root   string
	host   string
	poll   time.Duration
	layout *Layout
	shared []string
	uids   UIDRange

	mu       sync.Mutex
	sessions map[string]*Session
	byCgroup map[uint64]*Session
}

// Option configures a Manager.
type Option func(*Manager)

// WithRoot sets the directory that holds one directory per session
// (<root>/<id>/work is the workdir). The default is DefaultRoot.
func WithRoot(dir string) Option { return func(m *Manager) { m.root = dir } }

// WithHostID sets the host id written into events. The default is the
// host name.
func WithHostID(id string) Option { return func(m *Manager) { m.host = id } }

// WithPollInterval sets how often the limit monitor reads the counters.
// The default is 250 ms.
func WithPollInterval(d time.Duration) Option { return func(m *Manager) { m.poll = d } }

// WithShared names host directories that every session sees as they are,
// even when they lie beneath one of its private places (/tmp, say): the
// directory of the ingest socket, which the shims connect to. They must
// not be writable by the session's user. A private place itself is never
// shared.
func WithShared(dirs ...string) Option {
	return func(m *Manager) { m.shared = append(m.shared, dirs...) }
}

// WithUIDRange sets the range that a session's own uid is taken from
// (Spec.Agent). The default is DefaultUIDRange.
func WithUIDRange(r UIDRange) Option { return func(m *Manager) { m.uids = r } }

// WithLayout uses l instead of detecting the layout from /proc/self.
func WithLayout(l *Layout) Option { return func(m *Manager) { m.layout = l } }

// NewManager returns a Manager that reports every lifecycle step and limit
// hit to emit. emit is called synchronously from the session's goroutines
// and must never block: hand the event to a buffered queue and count what
// it drops, as every producer does. It returns ErrNoCgroups when the host
// has no cgroup2 mount and ErrNotSupported off Linux.
func NewManager(log hclog.Logger, emit func(*event.Event), opts ...Option) (*Manager, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: emit is nil", ErrInvalidSpec)
	}
	m := &Manager{
		log: log.Named("session"), emit: emit, root: DefaultRoot, poll: 250 * time.Millisecond, uids: DefaultUIDRange,
		sessions: map[string]*Session{}, byCgroup: map[uint64]*Session{},
	}
	for _, o := range opts {
		o(m)
	}
	if m.host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("reading host name: %w", err)
		}
		m.host = h
	}
	if m.poll <= 0 {
		return nil, fmt.Errorf("%w: poll interval %v", ErrInvalidSpec, m.poll)
	}
	if m.uids.Count == 0 || m.uids.First == 0 || m.uids.First+(m.uids.Count-1) < m.uids.First {
		return nil, fmt.Errorf("%w: session uid range %d+%d", ErrInvalidSpec, m.uids.First, m.uids.Count)
	}
	if m.layout == nil {
		l, err := readLayout()
		if err != nil {
			return nil, fmt.Errorf("detecting cgroup layout: %w", err)
		}
		m.layout = l
	}
	if err := os.MkdirAll(m.root, 0o711); err != nil {
		return nil, fmt.Errorf("creating session root: %w", err)
	}
	return m, nil
}

// Layout returns the cgroup layout the manager creates sessions beneath.
func (m *Manager) Layout() *Layout { return m.layout }

// Spec describes a session to create.
type Spec struct {
	// ID names the session; Create generates a short sortable random id
	// when it is empty. It must be 1-64 characters of [A-Za-z0-9_.-]
	// starting with a letter or digit.
	ID       string
	Tenant   string
	User     string
	Template string
	Image    string
	// Limits are the resource limits; zero fields are unlimited.
	Limits event.Limits
	// Seccomp is the filter that Start installs on the session's processes
	// before they run. nil is the default filter, which refuses every group
	// (seccomp.New(nil)): a session never runs unfiltered.
	Seccomp *seccomp.Filter
	// Agent, when set, gives the session a uid of its own (Session.UID),
	// taken from the manager's range at Create and given back at Cleanup,
	// which no other session on the machine has meanwhile: the agent's
	// processes then cannot signal, trace or look into another session's
	// (/proc/PID/root, cwd, environ, fd, mem), whose files are not its
	// own either. In the session's mount namespace /etc/passwd names that
	// uid Agent.Name.
	Agent *Agent
}

// Agent is the account whose name a session's own uid has in the session:
// the host's line of /etc/passwd for Name, with the uid replaced (home,
// shell and group are the host's), or, when the host has none, a line with
// GID, no home and no login shell.
type Agent struct {
	Name string
	GID  uint32
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidID reports whether id is a session id as Spec.ID must be.
func ValidID(id string) bool { return idRE.MatchString(id) }

// NewID returns a short, sortable, random session id: 16 lowercase
// base32 characters, the first 10 the creation time in milliseconds.
func NewID() string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford
	var r [4]byte
	rand.Read(r[:])
	ts := uint64(time.Now().UnixMilli())
	rnd := uint64(r[0])<<24 | uint64(r[1])<<16 | uint64(r[2])<<8 | uint64(r[3])
	var b [16]byte
	for i := 9; i >= 0; i-- {
		b[i] = alphabet[ts&31]
		ts >>= 5
	}
	for i := 15; i >= 10; i-- {
		b[i] = alphabet[rnd&31]
		rnd >>= 5
	}
	return string(b[:])
}

func (sp *Spec) validate() error {
	if !idRE.MatchString(sp.ID) {
		return fmt.Errorf("%w: id %q", ErrInvalidSpec, event.Clip(sp.ID, 80))
	}
	l := sp.Limits
	if l.MemoryBytes < 0 || l.Pids < 0 || l.TimeoutMS < 0 || l.DiskBytes < 0 || l.NetRate < 0 {
		return fmt.Errorf("%w: negative limit", ErrInvalidSpec)
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) || l.CPUs > 1<<16 {
		return fmt.Errorf("%w: cpus %v", ErrInvalidSpec, l.CPUs)
	}
	if l.NetRateAction != "" && l.NetRateAction != ActionThrottle && l.NetRateAction != ActionWarn {
		return fmt.Errorf("%w: net rate action %q", ErrInvalidSpec, event.Clip(l.NetRateAction, 80))
	}
	if l.MemoryBytes > 0 && l.MemoryBytes < 1<<20 {
		return fmt.Errorf("%w: memory limit %d below 1 MiB", ErrInvalidSpec, l.MemoryBytes)
	}
	if a := sp.Agent; a != nil && (a.Name == "" || strings.ContainsAny(a.Name, ":\n") || len(a.Name) > 64) {
		return fmt.Errorf("%w: agent name %q", ErrInvalidSpec, event.Clip(a.Name, 80))
	}
	return nil
}

type state int

const (
	stateCreated state = iota
	stateRunning
	statePaused
	stateTerminated
	stateCleaned
)

// Session is one sandbox session: its cgroups, workdir, main process and
// limit monitor.
type Session struct {
	m       *Manager
	spec    Spec
	dir     string
	workdir string
	fs      *sessionFS
	cg      *cgroup
	log     hclog.Logger
	// stateF is the session's state file, held locked while this manager
	// knows the session (saveState).
	stateF *os.File
	// adopted is set for a session that Abandoned found: it has no main
	// process, and only it may end with ReasonHostLost.
	adopted bool
	// own is the session's own uid (Spec.Agent), nil without one.
	own *ownUID
	// nested are the ids of the cgroups NewNested made, which Lookup maps
	// to the session until Cleanup; guarded by m.mu.
	nested []uint64

	mu         sync.Mutex
	state      state
	cmd        *exec.Cmd
	startedAt  time.Time
	ws         syscall.WaitStatus
	reaped     bool
	termReason string
	exitStatus *int32

	mainDone   chan struct{}
	terminated chan struct{}
	stopMon    chan struct{}
	monDone    chan struct{}

	mon monitor
}

// Create makes a session: its directory <root>/<id>; its filesystem, a
// tmpfs of Limits.DiskBytes (the tmpfs default, half of RAM, when zero)
// mounted at <root>/<id>/fs, whose work directory is bind-mounted on the
// workdir <root>/<id>/work; its v2 cgroup and, on hybrid hosts, its v1
// controller cgroups, all beneath this process's own cgroups, with the
// limits applied. First it writes the session's state file,
// <root>/<id>/session.json, held locked until Cleanup (see Abandoned).
// It emits session.create. A limit whose controller the host lacks fails
// with ErrControllerUnavailable; an id in use fails with ErrExists.
func (m *Manager) Create(ctx context.Context, spec Spec) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.ID == "" {
		spec.ID = NewID()
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	_, dup := m.sessions[spec.ID]
	if !dup {
		m.sessions[spec.ID] = nil // reserve
	}
	m.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("%w: %s", ErrExists, spec.ID)
	}
	s, err := m.create(spec)
	m.mu.Lock()
	if err != nil {
		delete(m.sessions, spec.ID)
	} else {
		m.sessions[spec.ID] = s
		m.byCgroup[s.cg.id] = s
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.emit(s.toEvent(change{op: "create"}))
	return s, nil
}

func (m *Manager) create(spec Spec) (*Session, error) {
	s := &Session{
		m: m, spec: spec, log: m.log.With("session_id", spec.ID),
		dir:        filepath.Join(m.root, spec.ID),
		mainDone:   make(chan struct{}),
		terminated: make(chan struct{}),
		stopMon:    make(chan struct{}),
		monDone:    make(chan struct{}),
	}
	s.workdir = filepath.Join(s.dir, "work")
	if err := os.Mkdir(s.dir, 0o711); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: directory %s", ErrExists, s.dir)
		}
		return nil, fmt.Errorf("creating session directory: %w", err)
	}
	undo := func() {
		os.RemoveAll(s.dir)
		if s.stateF != nil {
			s.stateF.Close()
		}
		s.own.release()
	}
	if spec.Agent != nil {
		own, err := m.allocUID()
		if err != nil {
			undo()
			return nil, err
		}
		s.own = own
	}
	if err := s.saveState(); err != nil {
		undo()
		return nil, err
	}
	if err := os.Mkdir(s.workdir, 0o755); err != nil {
		undo()
		return nil, fmt.Errorf("creating workdir: %w", err)
	}
	passwd := ""
	if s.own != nil {
		passwd = filepath.Join(s.dir, "passwd")
		if err := writePasswd(passwd, spec.Agent, s.own.uid); err != nil {
			undo()
			return nil, err
		}
	}
	f, err := newSessionFS(s.dir, m.root, spec.Limits.DiskBytes, m.shared)
	if err != nil {
		undo()
		return nil, err
	}
	f.passwd = passwd
	cg, err := newCgroup(m.layout, "sandtrail-"+spec.ID, spec.Limits)
	if err != nil {
		f.unmount()
		undo()
		return nil, fmt.Errorf("creating session cgroups: %w", err)
	}
	s.fs, s.cg = f, cg
	s.mon.init(s)
	return s, nil
}

// Lookup returns the id of the session whose v2 cgroup has id cgroupID. It
// is how the ingest server attributes a socket peer: SO_PEERCRED pid, the
// pid's v2 cgroup id, then the session.
func (m *Manager) Lookup(cgroupID uint64) (id string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byCgroup[cgroupID]
	if !ok {
		return "", false
	}
	return s.spec.ID, true
}

// Get returns the session with the given id.
func (m *Manager) Get(id string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	return s, ok && s != nil
}

// OOMVictim is the hook the eBPF collector calls from its oom:mark_victim
// handler: pid (named comm) in the cgroup with id cgroupID was chosen by the
// OOM killer. It must not block, and does not: it records the victim for
// the session's next memory_oom limit.hit. Victims outside every session
// are ignored.
func (m *Manager) OOMVictim(cgroupID uint64, pid int32, comm string) {
	m.mu.Lock()
	s := m.byCgroup[cgroupID]
	m.mu.Unlock()
	if s != nil {
		s.mon.victim(pid, comm)
	}
}

// ID returns the session id.
func (s *Session) ID() string { return s.spec.ID }

// Spec returns the spec the session was created with, with its id.
func (s *Session) Spec() Spec { return s.spec }

// Workdir returns the session's working directory, <root>/<id>/work.
func (s *Session) Workdir() string { return s.workdir }

// UID returns the session's own uid and true when it has one (Spec.Agent):
// the uid its agent runs as, no other session's while it exists.
func (s *Session) UID() (uint32, bool) {
	if s.own == nil {
		return 0, false
	}
	return s.own.uid, true
}

// CgroupID returns the id of the session's v2 cgroup: the inode number of
// its directory, which is what bpf_get_current_cgroup_id returns for every
// process of the session.
func (s *Session) CgroupID() uint64 { return s.cg.id }

// CgroupPath returns the directory of the session's v2 cgroup.
func (s *Session) CgroupPath() string { return s.cg.v2.Path }

// CgroupFD returns an open descriptor of the session's v2 cgroup for
// SysProcAttr.CgroupFD. The session owns it; it stays valid until Cleanup.
// Start uses it itself, and also joins the v1 cgroups, so prefer Start.
func (s *Session) CgroupFD() int { return int(s.cg.fd.Fd()) }

// Done is closed once the session has terminated.
func (s *Session) Done() <-chan struct{} { return s.terminated }

// Result returns the terminate reason and exit status, once Done is closed.
func (s *Session) Result() (reason string, exitStatus *int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termReason, s.exitStatus
}

// Start starts cmd as the session's main process, inside all of the
// session's cgroups from its first instruction (see the package doc for
// how). cmd.Dir defaults to the workdir; a zero cmd.WaitDelay becomes 2 s,
// so that descendants holding its output pipes cannot delay termination.
// The session waits for cmd itself: do not call cmd.Wait; use Done and
// Result. When the main process exits the session terminates: reason oom if
// the OOM killer killed it, signal if another signal did, normal otherwise.
// Start emits session.start and starts the limit monitor, whose timeout
// counts from now. A session has one main process; a second Start fails
// with ErrState. When Start fails the session stays created: Start again,
// or Terminate and Cleanup it.
func (s *Session) Start(ctx context.Context, cmd *exec.Cmd) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateCreated {
		return fmt.Errorf("%w: start: session already started or ended", ErrState)
	}
	if cmd.Dir == "" {
		cmd.Dir = s.workdir
	}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	if err := s.cg.start(cmd, s.enterFS, s.filter()); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if err := s.cg.checkMember(pid); err != nil {
		// Fail closed: a process outside its limits must not run.
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	s.cmd, s.state, s.startedAt = cmd, stateRunning, time.Now()
	uid := mainUID(cmd)
	s.m.emit(s.toEvent(change{op: "start", proc: &event.Proc{
		Pid: int32(pid), UID: &uid, Exe: cmd.Path, Argv: cmd.Args, Cwd: cmd.Dir, CgroupID: s.cg.id, StartTS: s.startedAt,
	}}))
	go s.wait()
	go s.mon.run()
	return nil
}

// mainUID is the uid the session's main process runs as: its
// credential's, or the manager's own when it has none. Rules read it as
// the agent's uid (the agent runs as root when it is 0).
func mainUID(cmd *exec.Cmd) uint32 {
	if a := cmd.SysProcAttr; a != nil && a.Credential != nil {
		return a.Credential.Uid
	}
	return uint32(os.Getuid())
}

// enterFS gives the calling thread the session's mount namespace. It
// unshares under the manager's lock, so that every other session whose
// mounts the copy holds is in the manager's map (reserved before it
// mounts), and detaches them all.
func (s *Session) enterFS() error {
	s.m.mu.Lock()
	err := unshareMounts()
	var others []string
	for id := range s.m.sessions {
		if id != s.spec.ID {
			others = append(others, filepath.Join(s.m.root, id))
		}
	}
	s.m.mu.Unlock()
	if err != nil {
		return err
	}
	return s.fs.enter(others)
}

// Seccomp returns the seccomp filter the session's processes run under.
func (s *Session) Seccomp() *seccomp.Filter { return s.filter() }

// filter returns the session's seccomp filter, the default one for none.
func (s *Session) filter() *seccomp.Filter {
	if s.spec.Seccomp != nil {
		return s.spec.Seccomp
	}
	return &seccomp.Filter{}
}

// wait reaps the main process and terminates the session after it.
func (s *Session) wait() {
	s.cmd.Wait()
	ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	s.mu.Lock()
	s.ws, s.reaped = ws, true
	s.mu.Unlock()
	close(s.mainDone)
	reason := ReasonNormal
	if ws.Signaled() {
		reason = ReasonSignal
		if ws.Signal() == syscall.SIGKILL && s.mon.oomKilled(int32(s.cmd.Process.Pid)) {
			reason = ReasonOOM
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.terminate(ctx, reason, nil); err != nil {
		s.log.Error("terminating session after its main process", "error", err)
	}
}

// Pause freezes every process of the session (v2 cgroup.freeze, or the v1
// freezer) and emits session.pause with reason (api, timeout or auto) and
// actor, who asked.
func (s *Session) Pause(ctx context.Context, reason, actor string) error {
	switch reason {
	case PauseAPI, PauseTimeout, PauseAuto:
	default:
		return fmt.Errorf("%w: pause reason %q", ErrInvalidSpec, event.Clip(reason, 32))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning || s.termReason != "" {
		return fmt.Errorf("%w: pause: session is not running", ErrState)
	}
	if err := s.cg.freeze(ctx, true); err != nil {
		return fmt.Errorf("pausing session: %w", err)
	}
	s.state = statePaused
	s.m.emit(s.toEvent(change{op: "pause", reason: reason, actor: actor}))
	return nil
}

// Resume thaws a paused session and emits session.resume with actor.
func (s *Session) Resume(ctx context.Context, actor string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != statePaused || s.termReason != "" {
		return fmt.Errorf("%w: resume: session is not paused", ErrState)
	}
	if err := s.cg.freeze(ctx, false); err != nil {
		return fmt.Errorf("resuming session: %w", err)
	}
	s.state = stateRunning
	s.m.emit(s.toEvent(change{op: "resume", actor: actor}))
	return nil
}

// Terminate kills every process of the session (cgroup.kill, or freeze and
// SIGKILL each), waits for them to be gone and emits session.terminate
// with reason and the exit status. A nil exitStatus means the main
// process's own: its exit code, or 128+signal when a signal ended it. The
// first termination wins: a later call, or the main process's exit, only
// waits for it and returns nil. ReasonHostLost is only for a session that
// Abandoned returned.
func (s *Session) Terminate(ctx context.Context, reason string, exitStatus *int32) error {
	switch reason {
	case ReasonNormal, ReasonTimeout, ReasonOOM, ReasonAPI, ReasonPolicyViolation, ReasonSignal:
	case ReasonHostLost:
		if !s.adopted {
			return fmt.Errorf("%w: terminate reason %s is for a session whose host was lost", ErrInvalidSpec, reason)
		}
	default:
		return fmt.Errorf("%w: terminate reason %q", ErrInvalidSpec, event.Clip(reason, 32))
	}
	return s.terminate(ctx, reason, exitStatus)
}

func (s *Session) terminate(ctx context.Context, reason string, exitStatus *int32) error {
	s.mu.Lock()
	if s.termReason != "" || s.state >= stateTerminated {
		s.mu.Unlock()
		select {
		case <-s.terminated:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for termination: %w", ctx.Err())
		}
	}
	s.termReason = reason
	started := s.cmd != nil
	s.mu.Unlock()

	var errs []error
	if err := s.cg.kill(ctx); err != nil {
		errs = append(errs, err)
	}
	if started {
		select {
		case <-s.mainDone:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("waiting for main process: %w", ctx.Err()))
		}
		close(s.stopMon)
		<-s.monDone
	}
	// A last look at the counters, so that the limit hits that ended the
	// session are recorded before its end.
	s.mon.poll(true)

	s.mu.Lock()
	if exitStatus == nil && s.reaped {
		exitStatus = event.I32(exitCode(s.ws))
	}
	s.exitStatus = exitStatus
	s.state = stateTerminated
	var proc *event.Proc
	if s.reaped {
		proc = &event.Proc{Pid: int32(s.cmd.Process.Pid), CgroupID: s.cg.id}
		if s.ws.Signaled() {
			proc.Signal = int32(s.ws.Signal())
		} else {
			proc.ExitCode = event.I32(int32(s.ws.ExitStatus()))
		}
	}
	s.mu.Unlock()
	s.m.emit(s.toEvent(change{op: "terminate", reason: reason, exitStatus: exitStatus, proc: proc}))
	close(s.terminated)
	if len(errs) > 0 {
		return fmt.Errorf("terminating session: %w", errors.Join(errs...))
	}
	return nil
}

// exitCode is the shell's view of a wait status: the exit code, or 128
// plus the signal number.
func exitCode(ws syscall.WaitStatus) int32 {
	if ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ws.ExitStatus())
}

// Cleanup removes the session after it terminated: its cgroups and its
// filesystem always, and its directory as fsState says: preserved copies
// the workdir's files out of the session's filesystem into <root>/<id>/work
// (failing with ErrNoSpace when that would leave less than 5% of the data
// filesystem free), deleted removes <root>/<id>, snapshot writes
// <root>/<id>/snapshot.tar (a tar of the workdir, symlinks stored as links
// and never followed) and then removes the workdir; the tar's sha256 goes
// into session.cleanup. The files of the private /tmp, /var/tmp, /dev/shm
// and /run/lock are dropped. Last, it removes the session's state file. A
// session that has not terminated fails with ErrState.
func (s *Session) Cleanup(ctx context.Context, fsState string) error {
	switch fsState {
	case FSPreserved, FSDeleted, FSSnapshot:
	default:
		return fmt.Errorf("%w: fs state %q", ErrInvalidSpec, event.Clip(fsState, 32))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateTerminated {
		return fmt.Errorf("%w: cleanup: session has not terminated", ErrState)
	}
	sum, err := s.cleanupFS(ctx, fsState)
	if err != nil {
		return err
	}
	if err := s.cg.closeAndRemove(ctx); err != nil {
		return err
	}
	s.own.release()
	if err := s.removeState(); err != nil {
		return err
	}
	if fsState == FSDeleted {
		if err := os.Remove(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing session directory: %w", err)
		}
	}
	s.mon.close()
	s.state = stateCleaned
	s.m.mu.Lock()
	delete(s.m.sessions, s.spec.ID)
	delete(s.m.byCgroup, s.cg.id)
	for _, id := range s.nested {
		if s.m.byCgroup[id] == s {
			delete(s.m.byCgroup, id)
		}
	}
	s.m.mu.Unlock()
	s.m.emit(s.toEvent(change{op: "cleanup", fsState: fsState, sha256: sum}))
	return nil
}

// cleanupFS keeps what fsState says of the workdir, unmounts the session's
// filesystem and returns the snapshot's sha256, if any. Deleted removes
// all of the session's directory but its state file, which Cleanup
// removes last. An adopted session whose filesystem is no longer mounted
// has nothing to copy out: its workdir is what is on disk.
func (s *Session) cleanupFS(ctx context.Context, fsState string) (string, error) {
	var sum string
	switch fsState {
	case FSSnapshot:
		var err error
		sum, err = snapshot(ctx, s.workdir, filepath.Join(s.dir, "snapshot.tar"))
		if err != nil {
			return "", err
		}
	case FSPreserved:
		if s.adopted && !s.fs.mounted() {
			break
		}
		used, _, err := s.fs.usage()
		if err != nil {
			return "", err
		}
		if err := roomFor(s.dir, used); err != nil {
			return "", err
		}
		if err := s.fs.unmountWork(); err != nil {
			return "", err
		}
		if err := copyTree(ctx, filepath.Join(s.fs.mnt, "work"), s.workdir, s.ownUIDOrNil()); err != nil {
			return "", fmt.Errorf("preserving workdir: %w", err)
		}
	}
	if err := s.fs.unmount(); err != nil {
		return "", err
	}
	switch fsState {
	case FSSnapshot:
		if err := os.RemoveAll(s.workdir); err != nil {
			return "", fmt.Errorf("removing workdir: %w", err)
		}
	case FSDeleted:
		if err := removeAllBut(s.dir, stateFile); err != nil {
			return "", fmt.Errorf("removing session directory: %w", err)
		}
	}
	return sum, nil
}

// ownUIDOrNil returns the session's own uid, or nil without one.
func (s *Session) ownUIDOrNil() *uint32 {
	if s.own == nil {
		return nil
	}
	return &s.own.uid
}

// removeAllBut removes everything in dir but the entry named keep.
func removeAllBut(dir, keep string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// change is one lifecycle step or limit hit, before it becomes an event.
type change struct {
	op         string // create, start, pause, resume, terminate, cleanup; "" for a limit hit
	reason     string
	actor      string
	exitStatus *int32
	fsState    string
	sha256     string
	limit      *event.Limit
	proc       *event.Proc
}

// toEvent is the one function that turns a session's lifecycle steps and
// limit hits into events.
func (s *Session) toEvent(c change) *event.Event {
	e := &event.Event{
		V: event.SchemaVersion, TS: time.Now().UTC(), SessionID: s.spec.ID,
		Host: s.m.host, Source: event.SourceSession, Proc: c.proc,
	}
	if c.limit != nil {
		e.Kind, e.Limit = event.KindLimitHit, c.limit
		return e
	}
	e.Kind = event.SessionKind(c.op)
	es := &event.Session{Op: c.op}
	switch c.op {
	case "create":
		lim := s.spec.Limits
		es.Tenant, es.User, es.Template, es.Image, es.Limits = s.spec.Tenant, s.spec.User, s.spec.Template, s.spec.Image, &lim
	case "start":
		lim := s.spec.Limits
		es.Host, es.Limits = s.m.host, &lim
	case "pause":
		es.Reason, es.Actor = c.reason, c.actor
	case "resume":
		es.Actor = c.actor
	case "terminate":
		es.Reason, es.ExitStatus = c.reason, c.exitStatus
	case "cleanup":
		es.FSState, es.SnapshotSHA256 = c.fsState, c.sha256
	}
	e.Session = es
	return e
}
