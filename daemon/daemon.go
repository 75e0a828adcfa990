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
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/dnsproxy"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/queue"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/tap"
	"github.com/sandtrail/sandtrail/shims/apt/broker"
)

// Daemon is the composition root: it wires the recording parts together
// in one process: the journal (the one writer), the event queue in front
// of it, the session manager, the eBPF process collector, the one
// attribution step (kernel/attribution, over the session manager) that
// the ingest server, the apt broker, the mirror and the DNS proxy decide
// sessions by, and, when asked, the ingest server and the index follower. `sandtrail daemon` runs one for the machine; `sandtrail run`
// runs one for its own session when no daemon is running.
//
// Every producer's events go into the queue, which never blocks them: the
// collector's events through a forwarding goroutine, the session manager's
// through its emit function. The collector's OOM handler names the victim
// to the manager. Each session's cgroup is watched by the collector from
// before its main process starts until after its cleanup. At start the daemon
// logs what the collector does without on this kernel, and fails when the
// policy requires a capability that the kernel lacks (require).
type Daemon struct {
	cfg *Config
	log hclog.Logger
	pol *policies.Engine // the daemon's policy (cfg.Policy)
	det *rules.Detector  // the detection rules, fed by the tap
	// egress decides the sessions' connections and lookups: pol, and,
	// when the daemon serves the mirror, the approved registries refused
	// to sessions (the mirror is then their only road to a registry).
	egress *policies.Engine
	jdir   string
	j      *journal.Journal
	app    tap.Appender // the journal, with the live rules watching
	q      *queue.Queue
	mgr    *session.Manager
	ids    *attribution.Attributor // the one attribution step, over mgr
	col    *collector.Collector
	dns    *dnsproxy.Proxy // the sessions' DNS proxy; nil with dns.enabled false
	srv    *server.Server
	mir    *Mirror        // nil without a mirror
	apt    *broker.Broker // nil without the apt broker
	api    *api.Server    // the tool API; nil without ingest
	tio    *toolIO        // what tool_io keeps of tool and model calls

	// opened is the journal's size when the daemon opened it.
	opened uint64
	// dnsSender: the proxy checks that a session's queries come from the
	// session's cgroup (dnsproxy.WithCgroup); false when the kernel cannot tell.
	dnsSender bool
	// upstreams names the addresses the mirror connected to by the name
	// it connected for (learnUpstream), for net events that the DNS
	// proxy's answers cannot name.
	upstreams upstreamNames
	forwarded chan struct{}
	// emitted counts the collector's events forwarded into the queue.
	emitted   atomic.Uint64
	served    chan error
	stopIndex context.CancelFunc
	indexed   chan struct{}
	// ixReady closes once the index follower opened the index; ret is
	// then the retention policy over it (nil when it could not open).
	ixReady   chan struct{}
	ret       *Retention
	alerts    alertSubs
	sinks     []*sinkRun
	closeOnce sync.Once
	closeErr  error
}

// Options say which optional parts a daemon runs.
type Options struct {
	// Ingest serves the ingest socket (cfg.Socket). When IngestOptional is
	// set, a socket that cannot be served is logged and skipped.
	Ingest, IngestOptional bool
	// Index follows the journal with the index in the background.
	Index bool
	// Mirror, when set, is the address the daemon serves the mirror on.
	Mirror string
	// Retention applies the retention policy (cfg.Retention) every
	// retention.interval, the first time shortly after start. It needs
	// Index. The control socket's retention and hold ops work whenever
	// Index is set.
	Retention bool
}

// Start opens the journal and starts the queue, the session manager,
// the collector and the optional parts. The caller must Close the daemon.
func Start(cfg *Config, log hclog.Logger, o Options) (d *Daemon, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("recording sessions needs root: the collector loads BPF programs and sessions need their own cgroups")
	}
	pol, err := LoadPolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	det, err := NewDetector(pol, cfg.Host)
	if err != nil {
		return nil, err
	}
	d = &Daemon{cfg: cfg, log: log, pol: pol, det: det, egress: pol, jdir: cfg.JournalDir(), forwarded: make(chan struct{})}
	if d.tio, err = newToolIO(pol, cfg.SealedDir()); err != nil {
		return nil, err
	}
	if o.Mirror != "" {
		d.egress = pol.RegistriesThroughMirror()
	}
	if d.j, err = OpenJournal(cfg, log); err != nil {
		return nil, err
	}
	d.opened = d.j.Size()
	// The live rules, the package view's (shim_mirror_mismatch,
	// shim_bypass, unverified_install) and the detection rules, see every
	// event once it is journaled, with its seq; their alerts go back
	// through the queue.
	watcher := pkgview.NewWatcher(pkgview.WithShimDir(cfg.ShimDir), pkgview.WithSystemWheels(SystemWheels(WheelDirs...)...))
	d.app = tap.New(d.j, d.emitRaised, watcher, det)
	d.q = queue.New(d.app, queue.WithLogger(log), queue.WithHost(cfg.Host))
	defer func() {
		if err != nil {
			d.closeParts()
		}
	}()
	// The sockets' directory (ingest, apt broker, control) stays the
	// daemon's in every session, even beneath its private /tmp.
	d.mgr, err = session.NewManager(log, d.q.Emit, session.WithRoot(cfg.SessionsDir()), session.WithHostID(cfg.Host),
		session.WithShared(cfg.SocketDir()))
	if err != nil {
		return d, fmt.Errorf("starting the session manager: %w", err)
	}
	d.ids = attribution.New(d.mgr)
	if err := openDataDir(cfg); err != nil {
		return d, err
	}
	if err := d.startSinks(context.Background()); err != nil {
		return d, err
	}
	if err := d.startDNS(); err != nil {
		return d, err
	}
	if err := d.startCollector(); err != nil {
		return d, err
	}
	d.endAbandoned()
	if o.Mirror != "" {
		if d.mir, err = ServeMirror(cfg, o.Mirror, pol, d.q.Emit,
			MirrorLinks{Sessions: d.mgr, Processes: newProcesses(d.col, cfg.ShimDir, log), Dialed: d.learnUpstream}, log); err != nil {
			return d, err
		}
	}
	if o.Ingest {
		if err := d.startSockets(o.IngestOptional); err != nil {
			return d, err
		}
	}
	if o.Index {
		ctx, cancel := context.WithCancel(context.Background())
		d.stopIndex, d.indexed, d.ixReady = cancel, make(chan struct{}), make(chan struct{})
		go func() {
			defer close(d.indexed)
			d.followIndex(ctx, o)
		}()
	}
	return d, nil
}

// startCollector starts the kernel collector, deciding the sessions'
// egress by d.egress, and forwards its events into the queue; it fails
// when the kernel lacks a capability the policy requires.
func (d *Daemon) startCollector() error {
	// The reads the collector records: the policy's sensitive paths, and
	// the installed package managers' core modules, whose read by a
	// process with no shim above it is a shim_bypass (pkgview).
	sensitive, readExceptions := d.pol.SensitiveReads("")
	sensitive = append(sensitive, managerModules("/")...)
	var err error
	d.col, err = collector.New(d.log, append([]collector.Option{collector.WithHost(d.cfg.Host), collector.WithOOMHandler(d.mgr.OOMVictim),
		collector.WithEgress(d.egress), collector.WithSensitiveReads(sensitive, readExceptions),
		collector.WithUnixAllowed(d.cfg.OwnSockets()...), collector.WithExecEnv(d.pol.ExecEnv())},
		d.dnsCollectorOptions()...)...)
	if err != nil {
		return fmt.Errorf("starting the process collector: %w", err)
	}
	go func() {
		defer close(d.forwarded)
		for e := range d.col.Events() {
			d.q.Emit(e)
			d.emitted.Add(1)
		}
	}()
	return d.checkKernel(d.pol.Require())
}

// endAbandoned ends the sessions that a daemon before this one left behind
// when it died without ending them (SIGKILL, a crash): for each, the
// collector watches its cgroup, everything still running in it is killed
// (session.terminate with reason host_lost), and it is cleaned up
// (session.cleanup), its workdir preserved, or deleted when there is no
// room to preserve it. It runs before this daemon serves anything. What
// fails is logged, and the session's state stays for the next daemon.
func (d *Daemon) endAbandoned() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ss, err := d.mgr.Abandoned(ctx)
	if err != nil {
		d.log.Warn("finding the sessions a lost daemon left behind", "error", err)
	}
	for _, s := range ss {
		if err := d.endDaemonLost(ctx, s); err != nil {
			d.log.Warn("ending a session whose daemon was lost", "session_id", s.ID(), "error", err)
			continue
		}
		d.log.Info("ended a session whose daemon was lost", "session_id", s.ID())
	}
}

// endDaemonLost ends and cleans up the abandoned session s.
func (d *Daemon) endDaemonLost(ctx context.Context, s *session.Session) error {
	watched := false
	if id := s.CgroupID(); id != 0 {
		if err := d.col.Watch(id, s.ID()); err != nil {
			d.log.Warn("watching a session whose daemon was lost", "session_id", s.ID(), "error", err)
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
		if uerr := d.col.Unwatch(s.CgroupID()); uerr != nil && err == nil {
			err = fmt.Errorf("unwatching session %s: %w", s.ID(), uerr)
		}
	}
	return err
}

// checkKernel logs what the running collector does without and fails when
// the policy requires a capability that the kernel lacks (require).
func (d *Daemon) checkKernel(require []string) error {
	k := d.col.Kernel()
	if k == nil {
		return nil
	}
	logWithout(d.log, k)
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

// unmetRequirements returns the error a daemon fails with when the kernel k
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

// startSockets serves the ingest socket and the tool API's; with optional,
// one that cannot be served is logged and skipped.
func (d *Daemon) startSockets(optional bool) error {
	if err := d.startIngest(); err != nil {
		if !optional {
			return err
		}
		d.log.Warn("ingest socket not served; shims cannot send events", "socket", d.cfg.Socket, "error", err)
	}
	if err := d.startAPI(); err != nil {
		if !optional {
			return err
		}
		d.log.Warn("tool API not served; the MCP proxy and orchestrators cannot post tool events", "socket", d.cfg.APISocket(), "error", err)
	}
	return nil
}

// startIngest serves the ingest socket, attributing peers with the
// session manager.
func (d *Daemon) startIngest() error {
	cfg := d.cfg
	mode, err := strconv.ParseUint(cfg.Ingest.SocketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("config: ingest.socket_mode %q is not an octal file mode", cfg.Ingest.SocketMode)
	}
	chk := newChecker(d.pol, d.mirrorURL(), cfg.Mirror.Upstreams, d.log)
	if err := d.startApt(chk); err != nil {
		d.log.Warn("apt broker not served; an unprivileged agent cannot apt-get install", "error", err)
	}
	srv := server.New(claimsAfterDaemon{flush: d.q.Flush, app: d.app, keep: d.tio.keep}, d.mgr,
		server.WithLogger(d.log),
		server.WithHost(cfg.Host),
		server.WithMaxConns(cfg.Ingest.MaxConns),
		server.WithMaxConnsPerPeer(cfg.Ingest.MaxConnsPerPeer),
		server.WithDedupSize(cfg.Ingest.DedupSize),
		server.WithIdleTimeout(cfg.Ingest.IdleTimeout),
		server.WithChecker(chk))
	if _, err := srv.RememberTail(d.j.Size(), uint64(max(cfg.Ingest.DedupSize, 0)), func(from uint64, fn func(uint64, []byte) error) error {
		return journal.Scan(d.jdir, from, fn)
	}); err != nil {
		return err
	}
	ln, err := server.Listen(cfg.Socket, os.FileMode(mode))
	if err != nil {
		return err
	}
	d.srv, d.served = srv, make(chan error, 1)
	go func() { d.served <- srv.Serve(ln) }()
	return nil
}

// The daemon is the control socket's Daemon and the session launcher's
// launch.Daemon.
var _ control.Daemon = (*Daemon)(nil)

// CreateSession creates a session, has the collector watch its cgroup and
// redirects its DNS lookups to the proxy, before anything can run in it. A
// spec without a seccomp filter gets the policy's (sandbox.seccomp.allow).
func (d *Daemon) CreateSession(ctx context.Context, spec session.Spec) (*session.Session, error) {
	t0 := time.Now()
	if spec.Seccomp == nil {
		f, err := seccomp.New(d.pol.SeccompAllow())
		if err != nil {
			return nil, fmt.Errorf("building the session's seccomp filter: %w", err)
		}
		spec.Seccomp = f
	}
	s, err := d.mgr.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("creating session: %w", err)
	}
	if err := d.record(s); err != nil {
		// Fail closed: a session that is not fully recorded must not run.
		_ = s.Terminate(ctx, session.ReasonAPI, nil)
		_ = s.Cleanup(ctx, session.FSDeleted)
		_ = d.col.Unwatch(s.CgroupID())
		return nil, err
	}
	d.log.Debug("session created", "session_id", s.ID(), "took", time.Since(t0))
	return s, nil
}

// record sets up the recording of a new session: the collector watches its
// cgroup, limits its network rate, reads beneath its home (its workdir)
// named by the policy (~/.ssh, ~/.aws, ...) are sensitive too, and its DNS
// goes to its own proxy listeners.
func (d *Daemon) record(s *session.Session) error {
	if err := d.col.Watch(s.CgroupID(), s.ID()); err != nil {
		return fmt.Errorf("watching session cgroup: %w", err)
	}
	if l := s.Spec().Limits; l.NetRate > 0 {
		if err := d.col.SetNetRate(s.CgroupID(), l.NetRate, l.NetRateAction == session.ActionWarn); err != nil {
			return fmt.Errorf("limiting the session's net rate: %w", err)
		}
	}
	if s.Seccomp().Refuses(seccomp.UserNamespaces) {
		if err := d.col.DenyUserNamespaces(s.CgroupID()); err != nil {
			return err
		}
	}
	if sens, exc := d.pol.SensitiveReads(s.Workdir()); len(sens) > 0 {
		if err := d.col.AddSensitive(s.CgroupID(), sens, exc); err != nil {
			return fmt.Errorf("adding the session's sensitive paths: %w", err)
		}
	}
	return d.redirectDNS(s)
}

// CleanupSession cleans a terminated session up and then stops watching
// its cgroup (which ends its DNS redirect) and closes its DNS listeners.
func (d *Daemon) CleanupSession(ctx context.Context, s *session.Session, fsState string) error {
	t0 := time.Now()
	defer func() { d.log.Debug("session cleaned up", "session_id", s.ID(), "took", time.Since(t0)) }()
	err := s.Cleanup(ctx, fsState)
	if err != nil {
		return fmt.Errorf("cleaning up session %s: %w", s.ID(), err)
	}
	if err := d.col.Unwatch(s.CgroupID()); err != nil && !errors.Is(err, collector.ErrClosed) {
		return fmt.Errorf("unwatching session %s: %w", s.ID(), err)
	}
	return d.releaseDNS(s.ID())
}

// flush waits until every event produced so far is in the journal: the
// collector's from the records its ring buffer holds now (collector.Sync),
// once they are forwarded into the queue, and then the queue's.
func (d *Daemon) flush(ctx context.Context) error {
	n, err := d.col.Sync(ctx)
	if err != nil {
		return fmt.Errorf("syncing the collector: %w", err)
	}
	for d.emitted.Load() < n {
		select {
		case <-d.forwarded:
			return d.q.Flush(ctx)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(forwardPoll):
		}
	}
	return d.q.Flush(ctx)
}

// forwardPoll is how often flush looks whether the collector's events it
// waits for are in the queue; the forwarder takes them at once, so it
// rarely looks twice.
const forwardPoll = 100 * time.Microsecond

// SessionEnv points a session's shims at the daemon's ingest socket and its
// package managers at the daemon's mirror.
func (d *Daemon) SessionEnv() []string {
	var env []string
	if d.cfg.ShimDir != "" && d.cfg.ShimDir != launch.ShimDir {
		env = append(env, "PATH="+d.cfg.ShimDir+":"+launch.SystemPath)
	}
	if d.srv != nil {
		env = append(env, "SANDTRAIL_SOCKET="+d.cfg.Socket)
	}
	if d.apt != nil {
		env = append(env, "SANDTRAIL_APT_SOCKET="+d.cfg.AptSocket())
	}
	if d.mir != nil {
		env = append(env, d.mir.sessionEnv()...)
	}
	return env
}

// mirrorURL is the daemon mirror's URL, "" without one.
func (d *Daemon) mirrorURL() string {
	if d.mir == nil {
		return ""
	}
	return d.mir.URL
}

// JournalSize is the journal's size.
func (d *Daemon) JournalSize() uint64 { return d.j.Size() }

// Opened is the journal's size when the daemon opened it: everything this
// daemon journals, its collector's collector.capabilities among it, has a
// seq at or after Opened.
func (d *Daemon) Opened() uint64 { return d.opened }

// Session returns the manager's session with the id.
func (d *Daemon) Session(id string) (*session.Session, bool) { return d.mgr.Get(id) }

// Sync makes the events so far durable and signed, for a client that reads
// its session back and verifies the journal.
func (d *Daemon) Sync(ctx context.Context) error {
	if err := d.flush(ctx); err != nil {
		return err
	}
	// The rules' alerts about the events just journaled went back into
	// the queue as they were appended (the tap): journal them too. Rules
	// ignore the alerts fed back, so one more flush is all.
	if err := d.q.Flush(ctx); err != nil {
		return err
	}
	_, err := d.j.Checkpoint(ctx)
	return err
}

// IngestDone returns the ingest server's result channel (nil without
// ingest).
func (d *Daemon) IngestDone() <-chan error { return d.served }

// IngestStats returns the ingest server's counters (zero without ingest).
func (d *Daemon) IngestStats() server.Stats {
	if d.srv == nil {
		return server.Stats{}
	}
	return d.srv.Stats()
}

// JournalDir is the journal's directory.
func (d *Daemon) JournalDir() string { return d.jdir }

// Attributor is the daemon's one attribution step over its sessions, for
// the servers the binary wires beside it (the control socket).
func (d *Daemon) Attributor() *attribution.Attributor { return d.ids }

// Close stops the parts in order: the ingest server, the DNS proxy, the
// collector (which delivers what is left in its ring buffer), the queue
// (which drains into the journal), the index follower and the journal,
// which signs a final checkpoint.
func (d *Daemon) Close() error {
	d.closeOnce.Do(d.closeParts)
	return d.closeErr
}

func (d *Daemon) closeParts() {
	var errs []error
	took := make([]any, 0, 16)
	step := func(name string, stop func() error) {
		t0 := time.Now()
		if err := stop(); err != nil {
			errs = append(errs, err)
		}
		took = append(took, name, time.Since(t0))
	}
	step("ingest", d.closeSockets)
	step("dns", d.closeDNS)
	step("collector", d.closeCollector)
	step("queue", d.closeQueue)
	step("index", func() error {
		if d.stopIndex != nil {
			d.stopIndex()
			<-d.indexed
		}
		return nil
	})
	step("sinks", d.closeSinks)
	step("journal", func() error {
		if d.j == nil {
			return nil
		}
		if err := d.j.Close(); err != nil {
			return fmt.Errorf("closing journal: %w", err)
		}
		return nil
	})
	d.log.Debug("host stopped", took...)
	d.closeErr = errors.Join(errs...)
}

// closeSockets stops the tool API, the ingest server, the apt broker and
// the mirror, and removes their sockets.
func (d *Daemon) closeSockets() error {
	var errs []error
	if d.api != nil {
		drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, d.api.Shutdown(drain))
		cancel()
		d.removeSocket(d.cfg.APISocket())
	}
	if d.srv != nil {
		drain, cancel := context.WithTimeout(context.Background(), d.cfg.Ingest.DrainTimeout)
		errs = append(errs, d.srv.Shutdown(drain))
		cancel()
		d.removeSocket(d.cfg.Socket)
		LogStats(d.log, "ingest stopped", d.srv.Stats())
	}
	if d.apt != nil {
		// Installs in flight are ended: their sessions are ending too.
		errs = append(errs, d.apt.Close())
		d.removeSocket(d.cfg.AptSocket())
	}
	if d.mir != nil {
		errs = append(errs, d.mir.Close())
	}
	return errors.Join(errs...)
}

// removeSocket removes a socket the daemon served.
func (d *Daemon) removeSocket(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("removing socket", "error", err)
	}
}

// closeDNS stops the DNS proxy.
func (d *Daemon) closeDNS() error {
	if d.dns == nil {
		return nil
	}
	err := d.dns.Close()
	st := d.dns.Stats()
	d.log.Debug("dns proxy stopped", "queries", st.Queries, "blocked", st.Blocked, "upstream_failures", st.UpstreamFailures,
		"shed", st.Shed, "malformed", st.Malformed)
	return err
}

// closeCollector stops the collector, which delivers what is left in its
// ring buffer, and waits until its events are in the queue.
func (d *Daemon) closeCollector() error {
	if d.col == nil {
		return nil
	}
	var err error
	if cerr := d.col.Close(); cerr != nil {
		err = fmt.Errorf("closing collector: %w", cerr)
	}
	<-d.forwarded
	st := d.col.Stats()
	d.log.Debug("collector stopped", "received", st.Received, "kernel_drops", st.KernelDrops, "queue_drops", st.QueueDrops)
	return err
}

// closeQueue drains the queue into the journal and stops it.
func (d *Daemon) closeQueue() error {
	if d.q == nil {
		return nil
	}
	err := d.q.Close()
	st := d.q.Stats()
	d.log.Debug("queue stopped", "appended", st.Appended, "dropped", st.Dropped, "loss_events", st.LossEvents, "invalid", st.Invalid, "failed", st.Failed)
	return err
}

// closeSinks signs a checkpoint of everything for the sinks to carry
// off-host, and stops them.
func (d *Daemon) closeSinks() error {
	if d.j != nil && len(d.sinks) > 0 {
		if _, err := d.j.Checkpoint(context.Background()); err != nil {
			d.log.Warn("signing the checkpoint for the sinks failed", "error", err)
		}
	}
	if err := d.stopSinks(5 * time.Second); err != nil {
		return fmt.Errorf("stopping sinks: %w", err)
	}
	return nil
}
