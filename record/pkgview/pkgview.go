// Package pkgview joins one session's package events into one row per
// package, and checks the shims' account against the mirror's and the
// kernel's: the view of `sandtrail packages`, and the live rules the daemon
// runs.
//
// A row joins the shim's pkg.install (what the agent's package manager says
// it installed) with the mirror's pkg.fetch of the same ecosystem, name and
// version (what was actually served, from where, with which hash). Refused
// installs (pkg.blocked) are rows of their own, and so is a bundled copy
// (a pkg.install with bundled_in), which came inside its carrier's
// artifact: it joins no fetch and is verified through the carrier's. The kernel's process events
// attribute to a package every process its install or build scripts started
// (npm lifecycle scripts, cargo build scripts, pip sdist builds, dpkg
// maintainer scripts), with the files they touched and the connections they
// made.
//
// Three rules raise alerts: RuleMismatch, when the shim claims a hash or
// a version that the mirror did not serve; RuleUnverified, when the shim
// claims an installed package that no verified fetch of the mirror's in
// the session accounts for, by hash, or when the kernel saw a package's
// manifest created that none accounts for, by name (installed.go: the
// read-back that needs no shim); and RuleBypass, when a real package
// manager ran without a shim above it. The install-time behaviour rules
// (conduct.go) read what a package's install scripts did: credentials
// read and then a connection out, an AI agent's CLI run with its checks
// off, files planted where they run later (and their later runs), a file
// run after a connection to an address no DNS answer named, a .pth from
// pip, a publish, a credential scanner; their alerts name the package
// (event.Alert.Package). Build finds them over a whole session; a Watcher
// finds the same ones live, one event at a time, through the same code.
//
// Trust model: shim events are the agent side's own account and are never
// believed alone; mirror and kernel events are trusted. A pkg.fetch counts
// as the mirror's only when its source is mirror: one with any other source
// (a client's, sent through the ingest socket, which marks it shim or api)
// is left out of the view, so it never makes a row shim+mirror or verified,
// and never gives the BOM a hash. A row says which sources saw the package
// (Seen), so a package only the shim claims, or only the mirror served,
// stands out. The package does no I/O and parses no
// bytes: it reads events that event.Unmarshal (or the index) already
// decoded.
package pkgview

import (
	"net/netip"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
)

// The values of Package.Seen: which sources account for a package.
const (
	// SeenBoth: the shim's pkg.install and the mirror's pkg.fetch agree on
	// the ecosystem, name and version.
	SeenBoth = "shim+mirror"
	// SeenMirrorOnly: the mirror served (or refused) it and no shim
	// claimed it, for example a fetch by a manager the shim did not run.
	SeenMirrorOnly = "mirror_only"
	// SeenShimOnly: the shim claims it and the mirror never served it (a
	// local cache, a direct URL, or a lie).
	SeenShimOnly = "shim_only"
	// SeenBlocked: the policy refused the request before the manager ran.
	SeenBlocked = "blocked"
	// SeenKernelOnly: only the kernel saw it: an install script ran under
	// this package's name, and neither the shim nor the mirror named it.
	SeenKernelOnly = "kernel_only"
	// SeenBundled: the shim claims a copy that came inside another
	// package's artifact (BundledIn). It has no fetch of its own and is
	// never joined with a fetch of its name and version: its bytes are
	// the carrier's, verified by the carrier's fetch.
	SeenBundled = "bundled"
)

// Seens lists the values of Package.Seen.
var Seens = []string{SeenBoth, SeenMirrorOnly, SeenShimOnly, SeenBlocked, SeenKernelOnly, SeenBundled}

// The rule ids of the alerts this package raises.
const (
	RuleMismatch = "shim_mirror_mismatch"
	RuleBypass   = "shim_bypass"
	// RuleUnverified: an installed package with no verified mirror fetch
	// of its artifact in the session.
	RuleUnverified = "unverified_install"
)

// Rules names every rule whose alerts this package raises: the trust
// rules above and the install-time behaviour rules (conduct.go), for a
// policy that disables one or sets its level (policies/rules).
var Rules = []string{RuleMismatch, RuleBypass, RuleUnverified, RuleCredentialExfil, RuleAIAgentUnsafe, RulePersistence,
	RulePlantedRan, RuleRawIPExec, RulePthFile, RulePublish, RuleSecretScanner}

// View is one session's packages and the alerts about them.
type View struct {
	SessionID string `json:"session_id"`
	// Packages are in the order of their first event.
	Packages []*Package `json:"packages"`
	// Alerts are the alert events the rules raised, in order. They are
	// derived, not read: alerts already in the record are not repeated.
	Alerts []*event.Event `json:"alerts"`
}

// Package is one package of a session: one ecosystem, name and version,
// one bundled copy (its name and version in one carrier), or one refused
// request.
type Package struct {
	Ecosystem string `json:"ecosystem"`
	// Name is as the first event wrote it; rows join on the ecosystem's
	// normalised name.
	Name string `json:"name"`
	// Version is the resolved version (the shim's, else the mirror's).
	Version string `json:"version,omitempty"`
	// Requested is the spec asked for; empty for a dependency.
	Requested string `json:"requested,omitempty"`
	Seen      string `json:"seen"`
	// SourceURL is the shim's source URL (the mirror's own URL when the
	// manager used the mirror); UpstreamURL is where the mirror fetched
	// the artifact from.
	SourceURL   string `json:"source_url,omitempty"`
	UpstreamURL string `json:"upstream_url,omitempty"`
	// Hash is the shim's artifact hash, MirrorHash the served one's, each
	// as the ecosystem writes it.
	Hash       string `json:"hash,omitempty"`
	MirrorHash string `json:"mirror_hash,omitempty"`
	// Verified: the mirror checked the artifact's hash (and signatures).
	Verified *bool `json:"verified,omitempty"`
	// Outcome is the mirror's (served, blocked, cooldown, ...): served if
	// any fetch was served, else the last refusal's.
	Outcome     string   `json:"outcome,omitempty"`
	Direct      *bool    `json:"direct,omitempty"`
	RequestedBy string   `json:"requested_by,omitempty"`
	RequiredBy  []string `json:"required_by,omitempty"`
	Manager     string   `json:"manager,omitempty"`
	// Pid is the real package manager's pid (the shim's manager_pid).
	Pid  int32   `json:"pid,omitempty"`
	UID  *uint32 `json:"uid,omitempty"`
	Purl string  `json:"purl,omitempty"`
	// Paths are the install paths the shim's claims name for the row
	// (npm's "node_modules/a/node_modules/b"), in order: a script is
	// charged to the row installed at its directory.
	Paths []string `json:"paths,omitempty"`
	// BundledIn is the purl of the package whose artifact carried a
	// bundled copy (SeenBundled).
	BundledIn string `json:"bundled_in,omitempty"`
	// Time is the first event's.
	Time time.Time `json:"time"`
	// Rule and Reason say why a request was blocked, or a fetch refused.
	Rule           string   `json:"rule,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	InstallScripts []string `json:"install_scripts,omitempty"`
	// Seqs are the journal seqs of the pkg events behind the row.
	Seqs []uint64 `json:"seqs"`
	// Alerts are the rule ids of the alerts raised about the row.
	Alerts []string `json:"alerts,omitempty"`
	// Processes are the processes the package's install or build scripts
	// started, with the files they touched and their connections.
	Processes   []Process `json:"processes,omitempty"`
	Files       []FileOp  `json:"files,omitempty"`
	Connections []Conn    `json:"connections,omitempty"`
	// FilesOmitted counts the script file events left out of Files (the
	// sensitive ones are always kept, up to a bound).
	FilesOmitted int `json:"files_omitted,omitempty"`
	// InstallActivity says whether the package ran code at install time
	// in the session: ActivityScripts or ActivityNone; empty for a
	// refused request.
	InstallActivity string `json:"install_activity,omitempty"`
}

// The values of Package.InstallActivity.
const (
	// ActivityScripts: install or build scripts of the package ran; its
	// Processes, Files and Connections say what they did.
	ActivityScripts = "install_scripts_ran"
	// ActivityNone: no install script of the package ran in the
	// session. That is all it says: code that runs when the package is
	// imported or run (chalk and debug, September 2025), or from a .pth
	// file (RulePthFile), is not install-time activity, and the package is
	// not thereby safe.
	ActivityNone = "no_install_time_activity"
)

// Process is a process started by a package's scripts.
type Process struct {
	Seq  uint64    `json:"seq"`
	TS   time.Time `json:"ts"`
	Pid  int32     `json:"pid"`
	PPid int32     `json:"ppid,omitempty"`
	Exe  string    `json:"exe,omitempty"`
	Argv []string  `json:"argv,omitempty"`
	Cwd  string    `json:"cwd,omitempty"`
	UID  *uint32   `json:"uid,omitempty"`
	// Match says how the process was attributed: one of the Match values,
	// or "inherited" from its parent.
	Match string `json:"match"`
}

// The values of Process.Match.
const (
	MatchNpm       = "npm_lifecycle"
	MatchCargo     = "cargo_build_script"
	MatchPip       = "pip_sdist_build"
	MatchDpkg      = "dpkg_maintainer_script"
	MatchInherited = "inherited"
)

// FileOp is a file event of a script process.
type FileOp struct {
	Seq       uint64    `json:"seq"`
	TS        time.Time `json:"ts"`
	Pid       int32     `json:"pid"`
	Op        string    `json:"op"`
	Path      string    `json:"path"`
	NewPath   string    `json:"new_path,omitempty"`
	Sensitive bool      `json:"sensitive,omitempty"`
}

// Conn is a connection or datagram of a script process.
type Conn struct {
	Seq     uint64    `json:"seq"`
	TS      time.Time `json:"ts"`
	Pid     int32     `json:"pid"`
	Op      string    `json:"op"`
	Proto   string    `json:"proto,omitempty"`
	DstIP   string    `json:"dst_ip,omitempty"`
	DstPort uint16    `json:"dst_port,omitempty"`
	Domain  string    `json:"domain,omitempty"`
	Verdict string    `json:"verdict,omitempty"`
}

// Option configures Build, New and NewWatcher.
type Option func(*options)

type options struct {
	shimDir  string
	shimExes []string
	// mirrors are the mirror's addresses given by the host.
	mirrors map[endpoint]bool
	// systemWheels are the join keys (keys) of the host's bundled wheels.
	systemWheels map[string]bool
}

func defaults(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithShimDir sets the directory of the shims (the configured shim_dir): a
// process whose executable is in it is a shim. There is no default: the
// record does not know where the launcher installs them, so the caller
// (the daemon, sandtrail packages and timeline) passes its configured
// directory; without one, only WithShimExe names a shim.
func WithShimDir(dir string) Option { return func(o *options) { o.shimDir = dir } }

// WithShimExe names another executable that is a shim, for shims that are
// links to one binary when the kernel records the link's target.
func WithShimExe(path string) Option {
	return func(o *options) { o.shimExes = append(o.shimExes, path) }
}

// WithMirror names the mirror's listening addresses (127.0.0.1:8484,
// [::1]:8484; one that does not parse as an address and port is left
// out): a script's connection to one is not a way out for the
// install-time behaviour rules. The view also learns them from the
// record: the address that a session's process that runs no script
// connected to last before the mirror recorded a fetch by it.
func WithMirror(addrs ...netip.AddrPort) Option {
	return func(o *options) {
		if o.mirrors == nil {
			o.mirrors = map[endpoint]bool{}
		}
		for _, a := range addrs {
			if a.IsValid() {
				o.mirrors[endpoint{a.Addr().Unmap().String(), a.Port()}] = true
			}
		}
	}
}

// SystemWheel is a wheel that the host's Python bundles for ensurepip
// (Debian's /usr/share/python-wheels, CPython's ensurepip/_bundled).
type SystemWheel struct{ Name, Version string }

// WithSystemWheels names the wheels the host bundles: `python3 -m venv`
// runs ensurepip, which installs them from the host's files, with no fetch
// of the mirror's, so the kernel's read-back (installed.go) takes a
// dist-info of one's name and version as accounted for. The same name and
// version installed from elsewhere passes too; the host's list should
// hold only wheels in directories root alone writes.
func WithSystemWheels(ws ...SystemWheel) Option {
	return func(o *options) {
		if o.systemWheels == nil {
			o.systemWheels = map[string]bool{}
		}
		for _, w := range ws {
			_, key := keys(resolver.PyPI, w.Name, w.Version)
			o.systemWheels[key] = true
		}
	}
}

// Build returns the view of one session's events, given in journal order
// (events of other sessions are skipped: the first event's session is the
// view's).
func Build(events []*event.Event, opts ...Option) *View {
	b := New(opts...)
	for _, e := range events {
		b.Add(e)
	}
	return b.View()
}

// Builder builds a View from one session's events, added in journal order.
type Builder struct {
	s *state
}

// New starts a view.
func New(opts ...Option) *Builder {
	return &Builder{s: newState("", defaults(opts), false)}
}

// Add adds the next event. Events of another session than the first
// event's, and alert events, are skipped.
func (b *Builder) Add(e *event.Event) {
	if e == nil {
		return
	}
	if b.s.session == "" {
		b.s.session = e.SessionID
	}
	if e.SessionID != b.s.session {
		return
	}
	b.s.add(e)
}

// View returns the view of the events added so far.
func (b *Builder) View() *View { return b.s.view() }
