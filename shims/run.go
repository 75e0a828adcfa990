package shims

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/resolver/purl"
	"github.com/sandtrail/sandtrail/shims/front"
)

// ExitRefused is the exit code of an install the shim refused: the policy
// blocked a request, or the install could not be checked.
const ExitRefused = 77

// ExitNotFound is the exit code when the real package manager is not found.
const ExitNotFound = 127

// DefaultSocket is the daemon's ingest socket, when SANDTRAIL_SOCKET is not
// set.
const DefaultSocket = "/run/sandtrail/ingest.sock"

// Manager is one package manager the shim stands in for.
type Manager struct {
	// Name is the command's name: npm, npx, pip, pip3, cargo, apt, apt-get.
	Name string
	// Manager is the manager recorded in events ("npm" for npx, "pip" for
	// pip3).
	Manager string
	// Ecosystem is the purl type of its packages.
	Ecosystem string
	// Plan plans an invocation.
	Plan Planner
	// Delegate, when set, runs an install that the agent cannot run itself
	// (apt-get as an unprivileged user) elsewhere, where it is checked and
	// recorded; ok false means run it here as usual.
	Delegate func(args []string, c Context) (exit int, ok bool, err error)
}

// Shim runs one invocation of a package manager through its shim.
type Shim struct {
	// Self is the shim's own executable, resolved: PATH entries that lead
	// back to it are skipped when looking for the real manager.
	Self string
	// Getenv and Environ read the invocation's environment.
	Getenv  func(string) string
	Environ func() []string
	// Stderr gets the shim's own messages; stdout is the manager's alone.
	Stderr io.Writer
}

// Run runs m for argv (argv[0] is the name it was called by) and returns
// the exit code. An invocation without install intent is exec'd straight
// away; Run then returns only on failure.
func (s *Shim) Run(m Manager, argv []string) int {
	// The manager's end is mirrored only once run's deferred cleanup
	// is done: re-raising a signal ends the shim at once.
	return s.run(m, argv).exit()
}

func (s *Shim) run(m Manager, argv []string) status {
	real, err := s.FindReal(m.Name)
	if err != nil {
		s.say("%v", err)
		return status{code: ExitNotFound}
	}
	dir, err := os.Getwd()
	if err != nil {
		dir = s.Getenv("PWD")
	}
	c := Context{Dir: dir, Getenv: s.Getenv, Environ: s.Environ, Mirror: s.Getenv("SANDTRAIL_MIRROR")}
	if m.Delegate != nil {
		if code, ok, err := m.Delegate(argv[1:], c); ok {
			if err != nil {
				s.say("%v", err)
			}
			return status{code: code}
		}
	}
	// The temporary directory is named now and made only for an install:
	// a call without install intent costs no more than its exec.
	c.TempDir = filepath.Join(os.TempDir(), "sandtrail-shim-"+ingest.NewEventID())
	plan, err := m.Plan(argv[1:], c)
	if err != nil {
		s.say("refused: %s %s: cannot check this install: %v", m.Name, strings.Join(argv[1:], " "), err)
		return status{code: ExitRefused}
	}
	if plan == nil {
		err := execve(real, argv, s.Environ())
		s.say("running %s: %v", real, err)
		return status{code: ExitNotFound}
	}
	// Mkdir, not MkdirAll: a directory that exists already is not ours.
	if err := os.Mkdir(c.TempDir, 0o700); err != nil {
		s.say("refused: creating a temporary directory: %v", err)
		return status{code: ExitRefused}
	}
	defer os.RemoveAll(c.TempDir)
	if plan.Cleanup != nil {
		defer plan.Cleanup()
	}
	client, err := s.client()
	if err != nil {
		s.say("refused: %v", err)
		return status{code: ExitRefused}
	}
	defer client.Close()
	if code, ok := s.check(client, m, plan); !ok {
		return status{code: code}
	}
	return s.install(client, m, real, argv, plan)
}

// install runs the real manager with the plan, records what it resolved
// and returns how the manager ended.
func (s *Shim) install(client *ingest.Client, m Manager, real string, argv []string, plan *Plan) status {
	args := argv[1:]
	if plan.Args != nil {
		args = plan.Args
	}
	cmd := exec.Command(real, args...)
	cmd.Args[0] = argv[0]
	cmd.Env = append(s.Environ(), plan.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	st, pid, err := runForwarding(cmd)
	if err != nil {
		s.say("running %s: %v", real, err)
		return status{code: ExitNotFound}
	}
	if plan.Collect != nil {
		pkgs, err := plan.Collect(st.code)
		if err != nil {
			s.say("reading back what %s installed: %v", m.Name, err)
		}
		s.record(client, m, pkgs, pid)
	}
	return st
}

// check asks the daemon about the plan's requests. ok is false when the
// install must not run; code is then its exit code.
func (s *Shim) check(client *ingest.Client, m Manager, plan *Plan) (code int, ok bool) {
	reqs, checks := Checks(plan.Requests, m.Manager, m.Ecosystem)
	if len(checks) == 0 {
		return 0, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, err := client.Check(ctx, checks)
	if err != nil {
		if s.inSession() || !errors.Is(err, ingest.ErrUnavailable) {
			s.say("refused: %s: the install cannot be checked against the policy: %v", m.Name, err)
			return ExitRefused, false
		}
		s.say("warning: no sandtrail daemon to check this install against (%v); running it unchecked", err)
		return 0, true
	}
	refused := false
	for i, v := range vs {
		what := describe(reqs[i])
		switch v.Verdict {
		case "block":
			refused = true
			s.say("refused: %s %s: %s (rule %s)", m.Name, what, v.Reason, ruleName(v.Rule))
		case "flag":
			s.say("warning: %s %s: %s (rule %s)", m.Name, what, v.Reason, ruleName(v.Rule))
		case "allow":
		default:
			refused = true
			s.say("refused: %s %s: the policy answered %q", m.Name, what, v.Verdict)
		}
	}
	if refused {
		s.say("nothing was installed. To ask for an exception, show your operator this message: " +
			"`sandtrail policy explain` names the rule, and docs/policy.md says how to allow a source or package.")
		return ExitRefused, false
	}
	return 0, true
}

// Checks are the checks that reqs ask the daemon, with the requests they
// stand for, in order. A request that names nothing (`apt-get upgrade`,
// an unreadable manifest) has nothing to check before the install and is
// left out: the mirror checks every artifact it is asked for.
func Checks(reqs []Request, manager, ecosystem string) ([]Request, []ingest.Check) {
	var kept []Request
	var checks []ingest.Check
	for _, r := range reqs {
		if r.Name == "" && r.Source == "" && r.Registry == "" {
			continue
		}
		kept = append(kept, r)
		checks = append(checks, ingest.Check{Manager: manager, Ecosystem: ecosystem, Name: r.Name, Spec: r.Spec, Exact: r.Exact,
			Source: r.Source, Registry: r.Registry})
	}
	return kept, checks
}

// inSession reports whether the shim runs in a sandtrail session: by its
// environment, or, since the agent controls that, by its cgroup, which it
// cannot leave (a session's v2 cgroup is sandtrail-<id>; the daemon's own
// is sandtrail-daemon). Inside a session an install that cannot be
// checked is refused; outside one it runs with a warning.
func (s *Shim) inSession() bool {
	if s.Getenv("SANDTRAIL_SESSION_ID") != "" {
		return true
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, path, ok := strings.Cut(line, "::") // the v2 line: 0::/PATH
		if !ok {
			continue
		}
		for _, dir := range strings.Split(path, "/") {
			if strings.HasPrefix(dir, "sandtrail-") && dir != "sandtrail-daemon" {
				return true
			}
		}
	}
	return false
}

// record sends one pkg.install per package; the client spools them when
// the daemon is down.
func (s *Shim) record(client *ingest.Client, m Manager, pkgs []Package, pid int) {
	if len(pkgs) == 0 {
		return
	}
	evs := make([]*event.Event, 0, len(pkgs))
	now := time.Now().UTC()
	for _, p := range pkgs {
		evs = append(evs, installEvent(m, p, pid, now))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Send(ctx, evs...); err != nil && !errors.Is(err, ingest.ErrSpooled) {
		s.say("recording %d installed packages: %v", len(evs), err)
	}
}

// installEvent is the one conversion of a read-back package to its
// pkg.install event.
func installEvent(m Manager, p Package, pid int, now time.Time) *event.Event {
	return &event.Event{V: event.SchemaVersion, TS: now, Kind: event.KindPkgInstall, Source: event.SourceShim,
		Pkg: &event.Pkg{Manager: m.Manager, Ecosystem: m.Ecosystem, Name: p.Name, Requested: p.Requested,
			Resolved: p.Version, SourceURL: event.RedactURL(p.SourceURL), Hash: p.Hash, Direct: event.Bool(p.Direct),
			RequestedBy: p.RequestedBy, RequiredBy: p.RequiredBy, Purl: purl.Of(m.Ecosystem, p.Name, p.Version),
			InstallScripts: p.InstallScripts, ManagerPid: int32(pid), Path: p.Path, BundledIn: p.BundledIn}}
}

// client is the ingest client of this invocation.
func (s *Shim) client() (*ingest.Client, error) {
	sock := s.Getenv("SANDTRAIL_SOCKET")
	if sock == "" {
		sock = DefaultSocket
	}
	var opts []ingest.ClientOption
	if dir, err := os.UserCacheDir(); err == nil {
		opts = append(opts, ingest.WithSpool(filepath.Join(dir, "sandtrail", "spool"), 0))
	}
	c, err := ingest.Dial(sock, opts...)
	if err != nil && len(opts) > 0 {
		// An unusable spool directory only costs the spool.
		c, err = ingest.Dial(sock)
	}
	return c, err
}

// FindReal finds the real manager name: the SANDTRAIL_REAL_<NAME> path when
// set, else the first executable of that name on PATH that is not the shim
// itself (front.Lookup, which the fast path uses too).
func (s *Shim) FindReal(name string) (string, error) {
	key := front.RealEnv(name)
	if p := s.Getenv(key); p != "" {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%s=%s: the real %s must be an absolute path", key, p, name)
		}
		return p, nil
	}
	self, err := os.Stat(s.Self)
	if err != nil {
		return "", fmt.Errorf("finding the real %s: %w", name, err)
	}
	if p, ok := front.Lookup(name, s.Getenv("PATH"), self); ok {
		return p, nil
	}
	return "", fmt.Errorf("the real %s is not on PATH after the shim (set %s to its path)", name, key)
}

func (s *Shim) say(format string, args ...any) {
	fmt.Fprintf(s.Stderr, "sandtrail: "+format+"\n", args...)
}

// describe names a request for a message.
func describe(r Request) string {
	switch {
	case r.Name != "" && r.Spec != "":
		return r.Name + " " + r.Spec
	case r.Name != "":
		return r.Name
	case r.Source != "":
		return event.RedactURL(r.Source)
	default:
		return "index " + event.RedactURL(r.Registry)
	}
}

func ruleName(r string) string {
	if r == "" {
		return "default"
	}
	return r
}
