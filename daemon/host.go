package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/dnsproxy"
	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/queue"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/shims/apt/broker"
)

// Host wires the recording parts together in one process: the journal (the
// one writer), the event queue in front of it, the session manager, the
// eBPF process collector and, when asked, the ingest server and the index
// follower. `sandtrail daemon` runs one for the machine; `sandtrail run`
// runs one for its own session when no daemon is running.
//
// Every producer's events go into the queue, which never blocks them: the
// collector's events through a forwarding goroutine, the session manager's
// through its emit function. The collector's OOM handler names the victim
// to the manager. Each session's cgroup is watched by the collector from
// before its main process starts until after its cleanup. At start the host
// logs what the collector does without on this kernel, and fails when the
// policy requires a capability that the kernel lacks (require).
type Host struct {
	cfg *Config
	log hclog.Logger
	pol *policies.Engine // the host's policy (cfg.Policy)
	// egress decides the sessions' connections and lookups: pol, and,
	// when the host serves the mirror, the approved registries refused
	// to sessions (the mirror is then their only road to a registry).
	egress *policies.Engine
	jdir   string
	j      *journal.Journal
	app    pkgview.Appender // the journal, with the package view's rules watching
	q      *queue.Queue
	mgr    *session.Manager
	col    *collector.Collector
	dns    *dnsproxy.Proxy // the sessions' DNS proxy; nil with dns.enabled false
	srv    *server.Server
	mir    *Mirror        // nil without a mirror
	apt    *broker.Broker // nil without the apt broker

	// opened is the journal's size when the host opened it.
	opened uint64
	// dnsSender: the proxy checks that a session's queries come from the
	// session's cgroup (dnsproxy.WithCgroup); false when the kernel cannot tell.
	dnsSender bool
	// upstreams names the addresses the mirror connected to by the host
	// it connected for (learnUpstream), for net events that the DNS
	// proxy's answers cannot name.
	upstreams upstreamNames
	forwarded chan struct{}
	served    chan error
	stopIndex context.CancelFunc
	indexed   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Options say which optional parts a host runs.
type Options struct {
	// Ingest serves the ingest socket (cfg.Socket). When IngestOptional is
	// set, a socket that cannot be served is logged and skipped.
	Ingest, IngestOptional bool
	// Index follows the journal with the index in the background.
	Index bool
	// Mirror, when set, is the address the host serves the mirror on.
	Mirror string
}

// startHost opens the journal and starts the queue, the session manager,
// the collector and the optional parts. The caller must Close the host.
func Start(cfg *Config, log hclog.Logger, o Options) (h *Host, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("recording sessions needs root: the collector loads BPF programs and sessions need their own cgroups")
	}
	pol, err := LoadPolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	h = &Host{cfg: cfg, log: log, pol: pol, egress: pol, jdir: cfg.JournalDir(), forwarded: make(chan struct{})}
	if o.Mirror != "" {
		h.egress = pol.RegistriesThroughMirror()
	}
	if h.j, err = OpenJournal(cfg, log); err != nil {
		return nil, err
	}
	h.opened = h.j.Size()
	// The package view's rules (shim_mirror_mismatch, shim_bypass,
	// unverified_install) see every event once it is journaled, with its
	// seq; their alerts go back through the queue.
	h.app = pkgview.NewWatcher(pkgview.WithShimDir(cfg.ShimDir), pkgview.WithSystemWheels(SystemWheels(WheelDirs...)...)).
		Tap(h.j, func(e *event.Event) { h.q.Emit(e) })
	h.q = queue.New(h.app, queue.WithLogger(log), queue.WithHost(cfg.Host))
	defer func() {
		if err != nil {
			h.closeParts()
		}
	}()
	// The sockets' directory (ingest, apt broker, control) stays the
	// host's in every session, even beneath its private /tmp.
	h.mgr, err = session.NewManager(log, h.q.Emit, session.WithRoot(cfg.SessionsDir()), session.WithHostID(cfg.Host),
		session.WithShared(cfg.SocketDir()))
	if err != nil {
		return h, fmt.Errorf("starting the session manager: %w", err)
	}
	if err := openDataDir(cfg); err != nil {
		return h, err
	}
	if err := h.startDNS(); err != nil {
		return h, err
	}
	if err := h.startCollector(); err != nil {
		return h, err
	}
	h.endAbandoned()
	if o.Mirror != "" {
		if h.mir, err = ServeMirror(cfg, o.Mirror, pol, h.q.Emit,
			MirrorLinks{Sessions: h.mgr, Processes: newProcesses(h.col, cfg.ShimDir, log), Dialed: h.learnUpstream}, log); err != nil {
			return h, err
		}
	}
	if o.Ingest {
		if err := h.startIngest(); err != nil {
			if !o.IngestOptional {
				return h, err
			}
			log.Warn("ingest socket not served; shims cannot send events", "socket", cfg.Socket, "error", err)
		}
	}
	if o.Index {
		ctx, cancel := context.WithCancel(context.Background())
		h.stopIndex, h.indexed = cancel, make(chan struct{})
		go func() {
			defer close(h.indexed)
			followIndex(ctx, cfg.IndexPath(), h.jdir, h.j, log)
		}()
	}
	return h, nil
}

// startCollector starts the kernel collector, deciding the sessions'
// egress by h.egress, and forwards its events into the queue; it fails
// when the kernel lacks a capability the policy requires.
func (h *Host) startCollector() error {
	// The reads the collector records: the policy's sensitive paths, and
	// the installed package managers' core modules, whose read by a
	// process with no shim above it is a shim_bypass (pkgview).
	sensitive, readExceptions := h.pol.SensitiveReads("")
	sensitive = append(sensitive, managerModules("/")...)
	var err error
	h.col, err = collector.New(h.log, append([]collector.Option{collector.WithHost(h.cfg.Host), collector.WithOOMHandler(h.mgr.OOMVictim),
		collector.WithEgress(h.egress), collector.WithSensitiveReads(sensitive, readExceptions),
		collector.WithUnixAllowed(h.cfg.OwnSockets()...), collector.WithExecEnv(h.pol.ExecEnv())},
		h.dnsCollectorOptions()...)...)
	if err != nil {
		return fmt.Errorf("starting the process collector: %w", err)
	}
	go func() {
		defer close(h.forwarded)
		for e := range h.col.Events() {
			h.q.Emit(e)
		}
	}()
	return h.checkKernel(h.pol.Require())
}

// endAbandoned ends the sessions that a host before this one left behind
// when it died without ending them (SIGKILL, a crash): for each, the
// collector watches its cgroup, everything still running in it is killed
// (session.terminate with reason host_lost), and it is cleaned up
// (session.cleanup), its workdir preserved, or deleted when there is no
// room to preserve it. It runs before this host serves anything. What
// fails is logged, and the session's state stays for the next host.
func (h *Host) endAbandoned() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss, err := h.mgr.Abandoned(ctx)
	if err != nil {
		h.log.Warn("finding the sessions a lost host left behind", "error", err)
	}
	for _, s := range ss {
		if err := h.endHostLost(ctx, s); err != nil {
			h.log.Warn("ending a session whose host was lost", "session_id", s.ID(), "error", err)
			continue
		}
		h.log.Info("ended a session whose host was lost", "session_id", s.ID())
	}
}

// endHostLost ends and cleans up the abandoned session s.
func (h *Host) endHostLost(ctx context.Context, s *session.Session) error {
	watched := false
	if id := s.CgroupID(); id != 0 {
		if err := h.col.Watch(id, s.ID()); err != nil {
			h.log.Warn("watching a session whose host was lost", "session_id", s.ID(), "error", err)
		} else {
			watched = true
		}
	}
	err := s.Terminate(ctx, session.ReasonHostLost, nil)
	if err == nil {
		err = s.Cleanup(ctx, session.FSPreserved)
		if errors.Is(err, session.ErrNoSpace) {
			err = s.Cleanup(ctx, session.FSDeleted)
		}
	}
	if watched {
		if uerr := h.col.Unwatch(s.CgroupID()); uerr != nil && err == nil {
			err = fmt.Errorf("unwatching session %s: %w", s.ID(), uerr)
		}
	}
	return err
}

// checkKernel logs what the running collector does without and fails when
// the policy requires a capability that the kernel lacks (require).
func (h *Host) checkKernel(require []string) error {
	k := h.col.Kernel()
	if k == nil {
		return nil
	}
	logWithout(h.log, k)
	return unmetRequirements(k, require)
}

// logWithout logs each capability that the kernel collector does without on
// the kernel k, one line each, with what it does instead.
func logWithout(log hclog.Logger, k *event.Kernel) {
	for _, c := range k.Capabilities {
		if !c.Have {
			log.Info("kernel collector runs without a capability", "capability", c.Name, "detail", c.Detail,
				"since", c.Since, "release", k.Release)
		}
	}
}

// unmetRequirements returns the error a host fails with when the kernel k
// lacks a capability that require (the policy's) names: one line that says
// why each is needed and from which Linux release it is there, "policy
// requires unix_enforce: ... (Linux 6.7+; this kernel is 6.1.0-50-cloud-amd64)".
// It returns nil when k has them all.
func unmetRequirements(k *event.Kernel, require []string) error {
	missing := k.Missing(require)
	if len(missing) == 0 {
		return nil
	}
	why := make([]string, len(missing))
	for i, n := range missing {
		why[i] = render.Requirement(k, n)
	}
	return fmt.Errorf("policy requires %s", strings.Join(why, "; and "))
}

// openDataDir lets session users reach their workdirs: it adds search
// permission for others (x, never r) to the data directory and the
// sessions directory, where an older install made them 0750. What lies in
// the data directory stays private by its own modes (journal/ and keys/
// are 0700, the index is created 0600).
func openDataDir(cfg *Config) error {
	for _, d := range []string{cfg.DataDir, cfg.SessionsDir()} {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking the data directory: %w", err)
		}
		if m := fi.Mode().Perm(); m&0o001 == 0 {
			if err := os.Chmod(d, m|0o001); err != nil {
				return fmt.Errorf("making %s searchable: %w", d, err)
			}
		}
	}
	return nil
}

// openJournal opens the journal of cfg with its signing key.
func OpenJournal(cfg *Config, log hclog.Logger) (*journal.Journal, error) {
	signer, err := journal.LoadSigner(cfg.KeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading signing key: %s does not exist; create it with `sandtrail keys generate` (or run install.sh)", cfg.KeyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("loading signing key: %w", err)
	}
	j, err := journal.Open(cfg.JournalDir(), signer,
		journal.WithLogger(log),
		journal.WithHost(cfg.Host),
		journal.WithOrigin(cfg.Origin),
		journal.WithCheckpointEvery(cfg.Checkpoint.Every),
		journal.WithCheckpointInterval(cfg.Checkpoint.Interval))
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("opening journal: %w: another sandtrail process (a daemon without a control socket, or another run) is writing %s; run `sandtrail daemon` to host several sessions at once", err, cfg.JournalDir())
	}
	if err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	return j, nil
}

// loadPolicy loads and compiles the policy file, or the embedded default
// policy when file is empty.
func LoadPolicy(file string) (*policies.Engine, error) {
	p, err := policies.Load(file)
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	eng, err := policies.New(p)
	if err != nil {
		return nil, fmt.Errorf("compiling policy: %w", err)
	}
	return eng, nil
}

// startIngest serves the ingest socket, attributing peers with the
// session manager.
func (h *Host) startIngest() error {
	cfg := h.cfg
	mode, err := strconv.ParseUint(cfg.Ingest.SocketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("config: ingest.socket_mode %q is not an octal file mode", cfg.Ingest.SocketMode)
	}
	chk := newChecker(h.pol, h.mirrorURL(), cfg.Mirror.Upstreams, h.log)
	if err := h.startApt(chk); err != nil {
		h.log.Warn("apt broker not served; an unprivileged agent cannot apt-get install", "error", err)
	}
	srv := server.New(claimsAfterHost{flush: h.q.Flush, app: h.app}, h.mgr,
		server.WithLogger(h.log),
		server.WithHost(cfg.Host),
		server.WithMaxConns(cfg.Ingest.MaxConns),
		server.WithMaxConnsPerPeer(cfg.Ingest.MaxConnsPerPeer),
		server.WithDedupSize(cfg.Ingest.DedupSize),
		server.WithIdleTimeout(cfg.Ingest.IdleTimeout),
		server.WithChecker(chk))
	if _, err := srv.RememberTail(h.j.Size(), uint64(max(cfg.Ingest.DedupSize, 0)), func(from uint64, fn func(uint64, []byte) error) error {
		return journal.Scan(h.jdir, from, fn)
	}); err != nil {
		return err
	}
	ln, err := server.Listen(cfg.Socket, os.FileMode(mode))
	if err != nil {
		return err
	}
	h.srv, h.served = srv, make(chan error, 1)
	go func() { h.served <- srv.Serve(ln) }()
	return nil
}

// The host is the control socket's and the session launcher's Host.
var _ control.Host = (*Host)(nil)

// CreateSession creates a session, has the collector watch its cgroup and
// redirects its DNS lookups to the proxy, before anything can run in it. A
// spec without a seccomp filter gets the policy's (sandbox.seccomp.allow).
func (h *Host) CreateSession(ctx context.Context, spec session.Spec) (*session.Session, error) {
	if spec.Seccomp == nil {
		f, err := seccomp.New(h.pol.SeccompAllow())
		if err != nil {
			return nil, fmt.Errorf("building the session's seccomp filter: %w", err)
		}
		spec.Seccomp = f
	}
	s, err := h.mgr.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("creating session: %w", err)
	}
	if err := h.record(s); err != nil {
		// Fail closed: a session that is not fully recorded must not run.
		_ = s.Terminate(ctx, session.ReasonAPI, nil)
		_ = s.Cleanup(ctx, session.FSDeleted)
		_ = h.col.Unwatch(s.CgroupID())
		return nil, err
	}
	return s, nil
}

// record sets up the recording of a new session: the collector watches its
// cgroup, limits its network rate, reads beneath its home (its workdir)
// named by the policy (~/.ssh, ~/.aws, ...) are sensitive too, and its DNS
// goes to its own proxy listeners.
func (h *Host) record(s *session.Session) error {
	if err := h.col.Watch(s.CgroupID(), s.ID()); err != nil {
		return fmt.Errorf("watching session cgroup: %w", err)
	}
	if l := s.Spec().Limits; l.NetRate > 0 {
		if err := h.col.SetNetRate(s.CgroupID(), l.NetRate, l.NetRateAction == session.ActionWarn); err != nil {
			return fmt.Errorf("limiting the session's net rate: %w", err)
		}
	}
	if s.Seccomp().Refuses(seccomp.UserNamespaces) {
		if err := h.col.DenyUserNamespaces(s.CgroupID()); err != nil {
			return err
		}
	}
	if sens, exc := h.pol.SensitiveReads(s.Workdir()); len(sens) > 0 {
		if err := h.col.AddSensitive(s.CgroupID(), sens, exc); err != nil {
			return fmt.Errorf("adding the session's sensitive paths: %w", err)
		}
	}
	return h.redirectDNS(s)
}

// CleanupSession cleans a terminated session up and then stops watching
// its cgroup (which ends its DNS redirect) and closes its DNS listeners.
func (h *Host) CleanupSession(ctx context.Context, s *session.Session, fsState string) error {
	err := s.Cleanup(ctx, fsState)
	if err != nil {
		return fmt.Errorf("cleaning up session %s: %w", s.ID(), err)
	}
	if err := h.col.Unwatch(s.CgroupID()); err != nil && !errors.Is(err, collector.ErrClosed) {
		return fmt.Errorf("unwatching session %s: %w", s.ID(), err)
	}
	return h.releaseDNS(s.ID())
}

// flush waits until every event produced so far is in the journal. The
// collector's reader may still hold the last records of a session that
// just ended; they arrive within its poll interval, so flush first waits
// that long.
func (h *Host) flush(ctx context.Context) error {
	select {
	case <-time.After(2 * collector.DefaultPollInterval):
	case <-ctx.Done():
	}
	return h.q.Flush(ctx)
}

// SessionEnv points a session's shims at the host's ingest socket and its
// package managers at the host's mirror.
func (h *Host) SessionEnv() []string {
	var env []string
	if h.cfg.ShimDir != "" && h.cfg.ShimDir != launch.ShimDir {
		env = append(env, "PATH="+h.cfg.ShimDir+":"+launch.SystemPath)
	}
	if h.srv != nil {
		env = append(env, "SANDTRAIL_SOCKET="+h.cfg.Socket)
	}
	if h.apt != nil {
		env = append(env, "SANDTRAIL_APT_SOCKET="+h.cfg.AptSocket())
	}
	if h.mir != nil {
		env = append(env, h.mir.sessionEnv()...)
	}
	return env
}

// mirrorURL is the host mirror's URL, "" without one.
func (h *Host) mirrorURL() string {
	if h.mir == nil {
		return ""
	}
	return h.mir.URL
}

// JournalSize is the journal's size.
func (h *Host) JournalSize() uint64 { return h.j.Size() }

// Opened is the journal's size when the host opened it: everything this
// host journals, its collector's collector.capabilities among it, has a
// seq at or after Opened.
func (h *Host) Opened() uint64 { return h.opened }

// Session returns the manager's session with the id.
func (h *Host) Session(id string) (*session.Session, bool) { return h.mgr.Get(id) }

// Sync makes the events so far durable and signed, for a client that reads
// its session back and verifies the journal.
func (h *Host) Sync(ctx context.Context) error {
	if err := h.flush(ctx); err != nil {
		return err
	}
	_, err := h.j.Checkpoint(ctx)
	return err
}

// IngestDone returns the ingest server's result channel (nil without
// ingest).
func (h *Host) IngestDone() <-chan error { return h.served }

// IngestStats returns the ingest server's counters (zero without ingest).
func (h *Host) IngestStats() server.Stats {
	if h.srv == nil {
		return server.Stats{}
	}
	return h.srv.Stats()
}

// JournalDir is the journal's directory.
func (h *Host) JournalDir() string { return h.jdir }

// Close stops the parts in order: the ingest server, the DNS proxy, the
// collector (which delivers what is left in its ring buffer), the queue
// (which drains into the journal), the index follower and the journal,
// which signs a final checkpoint.
func (h *Host) Close() error {
	h.closeOnce.Do(h.closeParts)
	return h.closeErr
}

func (h *Host) closeParts() {
	var errs []error
	if h.srv != nil {
		drain, cancel := context.WithTimeout(context.Background(), h.cfg.Ingest.DrainTimeout)
		errs = append(errs, h.srv.Shutdown(drain))
		cancel()
		if err := os.Remove(h.cfg.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("removing socket", "error", err)
		}
		LogStats(h.log, "ingest stopped", h.srv.Stats())
	}
	if h.apt != nil {
		// Installs in flight are ended: their sessions are ending too.
		errs = append(errs, h.apt.Close())
		if err := os.Remove(h.cfg.AptSocket()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("removing socket", "error", err)
		}
	}
	if h.mir != nil {
		errs = append(errs, h.mir.Close())
	}
	if h.dns != nil {
		if err := h.dns.Close(); err != nil {
			errs = append(errs, err)
		}
		st := h.dns.Stats()
		h.log.Debug("dns proxy stopped", "queries", st.Queries, "blocked", st.Blocked, "upstream_failures", st.UpstreamFailures,
			"shed", st.Shed, "malformed", st.Malformed)
	}
	if h.col != nil {
		if err := h.col.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing collector: %w", err))
		}
		<-h.forwarded
		st := h.col.Stats()
		h.log.Debug("collector stopped", "received", st.Received, "kernel_drops", st.KernelDrops, "queue_drops", st.QueueDrops)
	}
	if h.q != nil {
		if err := h.q.Close(); err != nil {
			errs = append(errs, err)
		}
		st := h.q.Stats()
		h.log.Debug("queue stopped", "appended", st.Appended, "dropped", st.Dropped, "loss_events", st.LossEvents, "invalid", st.Invalid, "failed", st.Failed)
	}
	if h.stopIndex != nil {
		h.stopIndex()
		<-h.indexed
	}
	if h.j != nil {
		if err := h.j.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing journal: %w", err))
		}
	}
	h.closeErr = errors.Join(errs...)
}
