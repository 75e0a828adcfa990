package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/timeline"
)

// runLong is run's help.
const runLong = `run creates a session, runs CMD in it and waits for it to end.

CMD runs as the unprivileged user sandtrail-agent (created by install.sh),
under a uid of the session's own (0x5a000000+n, given back at cleanup), so
that no other session can signal, trace or look into its processes (and
their files); --user runs CMD as exactly that account instead, whose uid
other sessions as the same user share. It starts in the session's workdir
<data_dir>/sessions/<id>/work (mode 0700, its uid's), with HOME there, inside the session's cgroups and limits from its first
instruction (a relative CMD path such as ./agent.sh is made absolute first).
Everything CMD can write lands in the session's own filesystem, a tmpfs of
--disk's size: the workdir, and private /tmp, /var/tmp, /dev/shm and
/run/lock (overlays on the host's, in the session's own mount namespace;
the host's directories never receive its files). The kernel enforces the
quota (writes fail with ENOSPC, and the session goes on); its pages count
against --memory too. --keep preserved copies the workdir back to disk at
cleanup; the private directories are dropped.
Its environment is built, not inherited: of run's environment only TERM,
COLORTERM, LANG, LANGUAGE, LC_* and TZ; PATH is the shim directory
(/usr/local/lib/sandtrail/shims) and then the standard system directories;
then --env-file's and --env's variables (--env wins); then HOME, PWD, USER,
LOGNAME and SANDTRAIL_SESSION_ID for the session. CMD is resolved against
that PATH with the agent's own permissions before the session starts: a
command the agent cannot run is an error that names the path. When run hosts the
session itself it also hosts the verifying registry mirror on 127.0.0.1 and
points the session at it (SANDTRAIL_MIRROR, npm_config_registry,
PIP_INDEX_URL). Its stdin, stdout and stderr are run's. The kernel
collector records every exec, fork and exit in the session; the session
manager records the lifecycle and every limit hit.

The session's DNS lookups (UDP and TCP to port 53, whatever resolver they
name) are redirected to sandtrail's DNS proxy, which forwards them to the
host's resolvers (--dns-upstream, config dns.upstream; default: the
nameservers of /etc/resolv.conf), records each lookup as a net.dns event and
answers NXDOMAIN for the policy's egress.blocked_domains. Set
SANDTRAIL_DNS_ENABLED=false (config dns.enabled) to leave lookups alone.

CMD and everything it starts run under a seccomp filter, with no_new_privs,
installed by the launcher before CMD's first instruction. It refuses with
EPERM: io_uring_setup, io_uring_enter and io_uring_register (io_uring);
clone and unshare with CLONE_NEWUSER, and setns into a user namespace
(user_namespaces; a clone3, whose flags are out of the filter's reach,
gets its child killed by the kernel collector before it runs); bpf;
perf_event_open;
userfaultfd; kexec_load and kexec_file_load (kexec); init_module,
finit_module and delete_module (kernel_modules). Syscalls of another ABI
(32-bit, x32) fail with ENOSYS. Each refusal is recorded as a process.denied
event naming the syscall. The policy lets a group through by name:

  sandbox:
    seccomp:
      allow: [io_uring, user_namespaces]

When CMD exits (or a limit, the timeout or a signal to run ends the session)
run terminates the session with the reason, cleans it up as --keep says, and
prints a summary on stderr: the session id, the reason, the exit status, the
duration, the events by category, alerts, limit hits, losses, the kernel
capabilities the collector ran without (a "kernel" line naming them, when
there are any; "sandtrail doctor" says what each is for), and whether the
journal verifies from the newest signed checkpoint before the session to its
end (so its cost is what the session added; "sandtrail verify" checks the
whole journal). It exits with CMD's exit status (128+signal when a signal
killed it).

When a daemon is running, run asks it to host the session over its control
socket (so that the journal has one writer); otherwise it hosts everything
in its own process, on the configuration's data_dir, which works on a fresh
machine right after install.sh.

Limits default to the policy's (--policy FILE, the config key policy, or
the embedded default policy); flags override them. 0 means unlimited.
--net-rate caps the session's network traffic in bytes per second, each
way (1MB = 1 MiB/s), in the kernel: over the rate packets are dropped and
TCP slows down, or, with the policy's limits.net_rate_action: warn, only
reported; each burst over the rate is one net_rate limit hit. When
run hosts the session itself, the same policy also decides egress (blocked
connects fail with EPERM), which file reads are sensitive enough to record,
and which domains the DNS proxy refuses; a daemon enforces the policy of its
own configuration.`

func newRunCmd(g *globals) *cobra.Command {
	var (
		req     launch.Request
		format  string
		lim     limitFlags
		envs    []string
		envFile string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a new recorded session and print a summary",
		Long:  runLong,
		Example: `  sandtrail run -- sh -c 'ls; cat /etc/passwd >/dev/null'
  sandtrail run --memory 512M --cpus 0.5 --pids 256 --timeout 10m -- python3 agent.py
  sandtrail run --user nobody --keep snapshot --format json -- ./agent.sh`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if _, err := launch.CheckKeep(req.Keep); err != nil {
				return usageErr(err)
			}
			bindDNSFlags(g, cmd)
			// Bound here, not when the command is built: mirror binds the
			// policy key to its own flag.
			g.bindFlag("policy", cmd.Flags().Lookup("policy"))
			cfg, err := g.load()
			if err != nil {
				return err
			}
			eng, err := daemon.LoadPolicy(cfg.Policy)
			if err != nil {
				return usageErr(err)
			}
			req.Limits, err = lim.apply(eng.Limits(), cmd.Flags())
			if err != nil {
				return usageErr(err)
			}
			req.Argv, req.Env = args, os.Environ()
			if req.Set, err = sessionSet(envs, envFile); err != nil {
				return usageErr(err)
			}
			// CMD runs in the session's workdir: a relative path names
			// a file relative to where run was started.
			if strings.Contains(args[0], "/") && !filepath.IsAbs(args[0]) {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return usageErr(err)
				}
				req.Argv = append([]string{abs}, args[1:]...)
			}
			// run is interactive: the host's routine logs stay quiet
			// unless a level was asked for.
			if !cmd.Flags().Changed("log-level") && os.Getenv("SANDTRAIL_LOG_LEVEL") == "" {
				cfg.LogLevel = "warn"
			}
			return runRun(cmd.Context(), cfg, newLogger(cfg), &req, format, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&req.ID, "session", "", "session id (default: a new sortable random id)")
	f.StringVar(&req.User, "user", "", "user to run CMD as, exactly (default "+launch.AgentUser+", under a uid of the session's own)")
	f.StringVar(&req.Tenant, "tenant", "", "tenant recorded in session.create")
	f.StringVar(&req.Template, "template", "", "template recorded in session.create")
	f.StringVar(&req.Image, "image", "", "image recorded in session.create")
	f.StringVar(&req.Keep, "keep", "preserved", "workdir at cleanup: preserved, deleted or snapshot")
	f.StringArrayVar(&envs, "env", nil, "KEY=VALUE set in the session's environment (repeatable)")
	f.StringVar(&envFile, "env-file", "", "file of KEY=VALUE lines set in the session's environment")
	f.String("policy", "", "policy file: default limits, egress rules, sensitive files, blocked domains (config key policy; default: the embedded policy)")
	f.StringVar(&format, "format", "text", "summary format on stderr: text or json")
	lim.bind(f)
	addDNSFlags(cmd)
	return cmd
}

// sessionSet reads --env and --env-file.
func sessionSet(envs []string, file string) ([]string, error) {
	set, err := launch.ParseEnv(envs)
	if err != nil {
		return nil, fmt.Errorf("--env %w", err)
	}
	if file == "" {
		return set, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--env-file: %w", err)
	}
	more, err := launch.ParseEnv(strings.Split(string(b), "\n"))
	if err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", file, err)
	}
	return launch.MergeEnv(more, set), nil
}

// limitFlags are the resource-limit flags shared by run and session create.
type limitFlags struct{ memory, cpus, pids, timeout, disk, netRate string }

func (l *limitFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&l.memory, "memory", "", "memory limit, e.g. 512M (default: the policy's)")
	f.StringVar(&l.cpus, "cpus", "", "CPU limit, e.g. 0.5 or 500m (default: the policy's)")
	f.StringVar(&l.pids, "pids", "", "process limit, e.g. 256 (default: the policy's)")
	f.StringVar(&l.timeout, "timeout", "", "wall-clock limit, e.g. 10m (default: the policy's)")
	f.StringVar(&l.disk, "disk", "", "size of the session's filesystem (workdir, /tmp, /var/tmp, /dev/shm, /run/lock), enforced by the kernel, e.g. 2G (default: the policy's)")
	f.StringVar(&l.netRate, "net-rate", "", "network rate limit in bytes per second, each way, e.g. 1MB (default: the policy's)")
}

// apply overrides base with the flags that were given.
func (l *limitFlags) apply(base event.Limits, f *pflag.FlagSet) (event.Limits, error) {
	out := base
	var err error
	if f.Changed("memory") {
		if out.MemoryBytes, err = policies.ParseSize(l.memory); err != nil {
			return out, fmt.Errorf("--memory: %w", err)
		}
	}
	if f.Changed("cpus") {
		if out.CPUs, err = policies.ParseCPUs(l.cpus); err != nil {
			return out, fmt.Errorf("--cpus: %w", err)
		}
	}
	if f.Changed("pids") {
		if out.Pids, err = policies.ParseCount(l.pids); err != nil {
			return out, fmt.Errorf("--pids: %w", err)
		}
	}
	if f.Changed("timeout") {
		d, err := policies.ParseDuration(l.timeout)
		if err != nil {
			return out, fmt.Errorf("--timeout: %w", err)
		}
		out.TimeoutMS = d.Milliseconds()
	}
	if f.Changed("disk") {
		if out.DiskBytes, err = policies.ParseSize(l.disk); err != nil {
			return out, fmt.Errorf("--disk: %w", err)
		}
	}
	if f.Changed("net-rate") {
		if out.NetRate, err = policies.ParseRate(l.netRate); err != nil {
			return out, fmt.Errorf("--net-rate: %w", err)
		}
	}
	return out, nil
}

// runRun runs req through the daemon when one is running, or in this
// process, prints the summary and returns an exitError with CMD's status.
func runRun(ctx context.Context, cfg *Config, log hclog.Logger, req *launch.Request, format string, stderr io.Writer) error {
	live, stopLive := liveAlerts(stderr)
	t0 := time.Now()
	res, err := control.Run(ctx, cfg.ControlSocket(), req, [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, live)
	hosted := hostedByDaemon
	var opened uint64
	if errors.Is(err, control.ErrNoDaemon) {
		hosted = hostedHere
		res, opened, err = runHosted(ctx, cfg, log, req, live)
	}
	stopLive()
	if res == nil {
		return err
	}
	kernelFrom := res.From
	if hosted == hostedHere {
		kernelFrom = opened
	}
	ran := time.Now()
	sum := summarize(ctx, cfg, res, hosted, kernelFrom)
	log.Debug("run timing", "hosted_by", hosted, "run", ran.Sub(t0), "summary", time.Since(ran))
	if err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	if format == "json" {
		_ = writeJSON(stderr, sum)
	} else {
		writeRunSummary(stderr, sum)
	}
	code := 0
	if res.ExitStatus != nil {
		code = int(*res.ExitStatus)
	}
	if err != nil && code == 0 {
		code = 1
	}
	return &exitError{code: code, err: errors.New("")}
}

// liveAlerts prints each alert of the session on w as the rules raise it,
// one line each, while the command runs: "sandtrail: alert [high] TITLE:
// SUMMARY". The rules call fn on their path: it hands the alert to a
// printer and never waits (past maxLiveAlerts waiting, one is not printed;
// it is journaled all the same). stop prints what waits and ends.
func liveAlerts(w io.Writer) (fn func(*event.Event), stop func()) {
	ch := make(chan *event.Event, maxLiveAlerts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			fmt.Fprintf(w, "sandtrail: alert [%s] %s: %s\n", render.Clean(e.Alert.Level, 16), render.Clean(e.Alert.Title, 80),
				render.Clean(e.Alert.Summary, 200))
		}
	}()
	var once sync.Once
	return func(e *event.Event) {
			if e.Alert == nil {
				return
			}
			select {
			case ch <- e:
			default:
			}
		}, func() {
			once.Do(func() { close(ch) })
			<-done
		}
}

// maxLiveAlerts bounds the alerts waiting to be printed.
const maxLiveAlerts = 256

// The hosts of a session, as run's summary names them.
const (
	hostedByDaemon = "daemon"
	hostedHere     = "this process"
)

// runHosted hosts the session in this process: journal, queue, session
// manager, collector and ingest socket. It also returns the journal's size
// when the host opened it (daemon.Opened), from which on its collector's
// collector.capabilities is journaled.
func runHosted(ctx context.Context, cfg *Config, log hclog.Logger, req *launch.Request, onAlert func(*event.Event)) (*launch.Result, uint64, error) {
	if _, err := launch.LookupAccount(req.User); err != nil {
		return nil, 0, err
	}
	h, err := daemon.Start(cfg, log, daemon.Options{Ingest: true, IngestOptional: true, Mirror: "127.0.0.1:0"})
	if err != nil {
		return nil, 0, err
	}
	stdio := [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
	stop := func() {}
	res, err := launch.Run(ctx, h, req, stdio, func(id string) { stop = h.WatchAlerts(id, onAlert) })
	// Close delivers the collector's last records and drains the queue;
	// the journal signs a final checkpoint. The alerts they raise are
	// shown before stop.
	cerr := h.Close()
	stop()
	return res, h.Opened(), errors.Join(err, cerr)
}

// summarize is run's summary of the session that res reports
// (timeline.Summarize), with the configured verifier key; for a daemon's
// session the host's kernel capabilities come from the index (which the
// daemon keeps current) when the journal from kernelFrom has none.
func summarize(ctx context.Context, cfg *Config, res *launch.Result, hosted string, kernelFrom uint64) *timeline.Summary {
	r := timeline.Run{SessionID: res.SessionID, HostedBy: hosted, Reason: res.Reason, ExitStatus: res.ExitStatus,
		StartError: res.StartErr, Workdir: res.Workdir, Keep: res.Keep, Started: res.Started, Ended: res.Ended,
		From: res.From, KernelFrom: kernelFrom}
	src := timeline.Sources{Verifiers: func() (note.Verifiers, error) { return loadVerifiers(cfg, nil) }}
	if hosted == hostedByDaemon {
		src.Kernel = func() (*event.Kernel, error) {
			ix, err := openIndex(ctx, cfg, hclog.NewNullLogger())
			if err != nil {
				return nil, err
			}
			defer ix.Close()
			return ix.NewestKernel(ctx, res.From)
		}
	}
	return timeline.Summarize(cfg.JournalDir(), r, src)
}

// writeRunSummary prints run's summary as text.
func writeRunSummary(w io.Writer, s *timeline.Summary) {
	status := "-"
	if s.ExitStatus != nil {
		status = fmt.Sprint(*s.ExitStatus)
	}
	fmt.Fprintf(w, "\nsandtrail: session %s ended: %s, exit status %s, after %s (hosted by %s)\n", s.SessionID, s.Reason, status, s.Duration, s.HostedBy)
	if s.StartError != "" {
		fmt.Fprintf(w, "  start     failed: %s\n", s.StartError)
	}
	cats := make([]string, 0, len(s.ByCategory))
	for c := range s.ByCategory {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	parts := make([]string, len(cats))
	for i, c := range cats {
		parts[i] = fmt.Sprintf("%s %d", c, s.ByCategory[c])
	}
	fmt.Fprintf(w, "  events    %d (%s)\n", s.Events, strings.Join(parts, ", "))
	writeList(w, "alerts", s.Alerts)
	writeList(w, "limits", s.Limits)
	if s.Lost > 0 {
		fmt.Fprintf(w, "  lost      %d events (see the session's collector.loss events)\n", s.Lost)
	}
	if s.LostHostWide > 0 {
		fmt.Fprintf(w, "  lost      %d events host-wide while it ran, whose session is not known\n", s.LostHostWide)
	}
	if k := render.KernelWithout(s.Kernel); k != "" {
		fmt.Fprintf(w, "  kernel    %s\n", k)
	}
	ws := s.Keep + " at " + s.Workdir
	if s.Snapshot != "" {
		ws = "snapshot sha256:" + s.Snapshot
	}
	fmt.Fprintf(w, "  workdir   %s\n", ws)
	j := s.Journal
	fmt.Fprintf(w, "  journal   %s from seq %d: %d entries, %d covered by a signed checkpoint (%s)\n", j.Status, j.VerifiedFrom, j.Entries, j.Covered, j.Dir)
	if j.Error != "" {
		fmt.Fprintf(w, "            %s\n", j.Error)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "  error     %s\n", e)
	}
	fmt.Fprintf(w, "  details   sandtrail timeline %s\n", s.SessionID)
}

// writeList prints a labelled list, at most 5 lines of it.
func writeList(w io.Writer, label string, items []string) {
	if len(items) == 0 {
		fmt.Fprintf(w, "  %-9s none\n", label)
		return
	}
	fmt.Fprintf(w, "  %-9s %d\n", label, len(items))
	for i, it := range items {
		if i == 5 {
			fmt.Fprintf(w, "            … and %d more\n", len(items)-5)
			break
		}
		fmt.Fprintf(w, "            %s\n", it)
	}
}
