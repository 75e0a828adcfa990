// Package collector is sandtrail's eBPF kernel collector. It loads four
// program families into the kernel and turns their records into events of
// the processes in watched session cgroups (Watch), or of the whole host
// (WithHostWide):
//
//   - processes (bpf/process.c): exec (with the identity of the file the
//     kernel executed, its sha256, exact argv with its tail, cwd, the pipes
//     on fd 0 and 1, and the environment variables named by WithExecEnv;
//     and its lineage from the collector's bounded table of the forks,
//     execs and exits before it, lineage.go: its ancestors and the execs at
//     the other ends of its pipes),
//     fork, exit and failed exec, and the victims of the kernel's OOM
//     killer (WithOOMHandler);
//   - files (bpf/file.c): opens, directory creations, deletes, renames,
//     links, truncates, chmods and mounts with absolute paths; reads only
//     beneath sensitive paths (WithSensitiveReads, AddSensitive), decided
//     at the open, and repeats merged into one event (file.count,
//     WithMergeWindow); and ptrace attach, seize and traceme requests
//     (process.ptrace);
//   - network (bpf/net.c): connects and UDP sends with the verdict of the
//     egress policy, which the cgroup socket hooks enforce (WithEgress, fed
//     by LearnDomain: a blocked connect fails with EPERM), listens, accepts
//     and closes with the bytes of each TCP connection, and each session's
//     port-53 traffic sent to its DNS proxy (RedirectDNS);
//   - the network rate limit (bpf/rate.c): a token bucket per direction
//     for each rate-limited session (SetNetRate) in cgroup_skb programs,
//     and a limit.hit net_rate event per burst over the rate.
//
// The egress policy comes in through the EgressPolicy interface and the
// standard-library-only types of policies/egress, so that the collector
// does not depend on the policy engine.
//
// Trust model: the collector runs as root, outside the agent's reach. The
// kernel attributes every event to a cgroup, and the collector maps the cgroup
// to the session that Watch registered, so a process inside a session cannot
// claim another session. Events are marked event.SourceKernel.
//
// The collector never blocks on a slow consumer and never loses an event
// silently: a record that does not fit in the kernel ring buffer is counted
// per kind in the kernel, an event that does not fit in the Events channel is
// counted in Go, and the counts become "collector.loss" events with the exact
// number lost and the kind lost (sources "kernel:ringbuf", "collector:queue",
// "kernel:recursion" and "kernel:table"); Stats returns the counters.
//
// The BPF programs are in bpf/process.c, bpf/file.c and bpf/net.c; their
// structs are defined once in the headers beside them (bpf/common.h,
// bpf/file.h, bpf/net.h) and generated into Go by bpf2go (see gen.go).
// Generated types never leave this package. The subpackages hold the rest
// of the kernel side: cgroup (finding cgroups), session (session cgroups,
// lifecycle and limits) and dns (the DNS proxy).
//
// New returns ErrNotSupported on any OS but Linux (collector_other.go) and
// on a Linux without the kernel features it needs, and ErrPermission
// without the privileges to load BPF programs.
package collector

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies/egress"
)

// Sentinel errors.
var (
	// ErrNotSupported is returned by New on systems without the kernel
	// features the collector needs (any OS but Linux, or a Linux without BPF
	// ring buffers, BTF or tp_btf).
	ErrNotSupported = errors.New("collector: not supported on this system")
	// ErrPermission is returned by New when the process lacks the privileges
	// to load BPF programs (root, or CAP_BPF with CAP_PERFMON).
	ErrPermission = errors.New("collector: insufficient privileges")
	// ErrClosed is returned by Watch and Unwatch after Close.
	ErrClosed = errors.New("collector: closed")
)

// Loss sources written in event.Loss.Source.
const (
	LossSourceRingbuf = "kernel:ringbuf"
	LossSourceQueue   = "collector:queue"
	// LossSourceRecursion counts runs of a BPF program that the kernel
	// skipped because another BPF program was running on the CPU.
	LossSourceRecursion = "kernel:recursion"
	// LossSourceTable counts TCP connections (and listeners) that did not
	// fit in the network programs' tables: their net.close (or the
	// net.accept of their connections) is not recorded.
	LossSourceTable = "kernel:table"
)

// Defaults.
const (
	DefaultRingBufferSize = 16 << 20
	DefaultQueueSize      = 8192
	DefaultLossInterval   = time.Second
	DefaultDrainTimeout   = 10 * time.Second
	DefaultPollInterval   = 50 * time.Millisecond
	// DefaultMergeWindow is how long identical file operations of one
	// process are merged into one event (WithMergeWindow).
	DefaultMergeWindow = time.Second
	// DefaultWakeupBytes caps the default wake-up threshold, which is an
	// eighth of the ring buffer.
	DefaultWakeupBytes = 2 << 20
)

// OOMHandler is called, from the collector's reader goroutine, for every OOM
// victim in a watched cgroup. cgroupID is the watched cgroup (the one passed
// to Watch) the victim belongs to, or the victim's own cgroup in host-wide
// mode when no watched cgroup matches. It must not block.
type OOMHandler func(cgroupID uint64, pid int32, comm string)

// Stats are the collector's counters since New.
type Stats struct {
	// Received is the number of records read from the kernel ring buffer.
	Received uint64
	// KernelDrops is the number of records the kernel could not put in the
	// ring buffer because it was full, and the connections that did not fit
	// in the network programs' tables (LossSourceTable).
	KernelDrops uint64
	// QueueDrops is the number of events dropped because the Events channel
	// was full.
	QueueDrops uint64
	// DecodeErrors is the number of records that could not be decoded.
	DecodeErrors uint64
	// LineageEvicted is the number of entries (processes, pipe ends) that
	// the bounds of the lineage table evicted: an exec whose ancestor or
	// pipe peer was evicted lists fewer ancestors, or no peer. No event is
	// lost by it.
	LineageEvicted uint64
	// BPFRunTime and BPFRuns are the time the kernel spent in the
	// collector's BPF programs and how often they ran. The kernel counts
	// them only while BPF statistics are enabled (sysctl
	// kernel.bpf_stats_enabled=1, or ebpf.EnableStats).
	BPFRunTime time.Duration
	BPFRuns    uint64
	// BPFMisses is the number of times a program did not run because
	// another BPF program was running on the CPU: events that were never
	// seen. The kernel always counts these.
	BPFMisses uint64
}

type options struct {
	ringSize     int
	queueSize    int
	hostWide     bool
	oom          OOMHandler
	lossInterval time.Duration
	drainTimeout time.Duration
	host         string
	wakeupBytes  int
	poll         time.Duration
	// gate, when set, holds the reader back until it is closed (tests use
	// it to fill the ring buffer).
	gate <-chan struct{}
	// egress is enforced by the socket hooks; nil allows everything.
	egress       EgressPolicy
	domainLookup func(netip.Addr) string
	// unixAllowed are the unix socket addresses always allowed
	// (WithUnixAllowed).
	unixAllowed []string
	// sensitive and readExceptions are the host-wide read rules
	// (WithSensitiveReads).
	sensitive, readExceptions []string
	// mergeWindow is how long identical file events of one process are
	// merged (file.count).
	mergeWindow time.Duration
	// execEnv names the environment variables recorded at exec.
	execEnv []string
}

// Option configures New.
type Option func(*options) error

// WithRingBufferSize sets the size of the kernel ring buffer in bytes. It must
// be a power of two of at least the page size. A record larger than the ring
// buffer is always dropped (and counted). The default is 16 MiB.
func WithRingBufferSize(n int) Option {
	return func(o *options) error {
		if n <= 0 || n&(n-1) != 0 || n < os.Getpagesize() {
			return fmt.Errorf("ring buffer size %d: not a power of two of at least a page", n)
		}
		o.ringSize = n
		return nil
	}
}

// WithQueueSize sets the capacity of the Events channel. The default is 8192.
func WithQueueSize(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("queue size %d: must be positive", n)
		}
		o.queueSize = n
		return nil
	}
}

// WithHostWide records the processes of the whole host, not only those in
// watched cgroups. Their events carry no session id.
func WithHostWide(on bool) Option {
	return func(o *options) error {
		o.hostWide = on
		return nil
	}
}

// WithOOMHandler sets the function called for each OOM victim.
func WithOOMHandler(h OOMHandler) Option {
	return func(o *options) error {
		o.oom = h
		return nil
	}
}

// WithLossInterval sets how often the kernel drop counters are read and
// turned into collector.loss events. The default is one second.
func WithLossInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("loss interval %v: must be positive", d)
		}
		o.lossInterval = d
		return nil
	}
}

// WithDrainTimeout bounds how long Close waits for the consumer to take the
// final collector.loss events. The default is ten seconds.
func WithDrainTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("drain timeout %v: must not be negative", d)
		}
		o.drainTimeout = d
		return nil
	}
}

// WithWakeup batches the reader's wake-ups: the kernel wakes the reader only
// when at least bytes are waiting in the ring buffer, and the reader polls
// every interval for the rest, so an event waits at most about interval.
// bytes 0 wakes the reader for every record (lowest latency, most CPU). The
// default is an eighth of the ring buffer, at most 2 MiB, and 50 ms: every
// wake-up of the reader costs context switches (the reader's blocking read,
// the Go scheduler's hand-off of its P), so under load the reader mostly
// polls.
func WithWakeup(bytes int, interval time.Duration) Option {
	return func(o *options) error {
		if bytes < 0 {
			return fmt.Errorf("wake-up bytes %d: must not be negative", bytes)
		}
		if interval <= 0 {
			return fmt.Errorf("poll interval %v: must be positive", interval)
		}
		o.wakeupBytes = bytes
		o.poll = interval
		return nil
	}
}

// WithHost sets event.Event.Host on every event.
func WithHost(name string) Option {
	return func(o *options) error {
		o.host = name
		return nil
	}
}

// EgressPolicy is the egress policy that WithEgress enforces in the kernel.
// *policy.Engine (package policies) implements it.
type EgressPolicy interface {
	// EgressTable returns the rules on addresses and ports, which New
	// compiles into the kernel's maps.
	EgressTable() egress.Table
	// EgressDomain classifies a domain given to LearnDomain, for the rules
	// of the table that look at the domain.
	EgressDomain(domain string) egress.DomainClass
	// EgressReason returns the reason for the verdict on a connection to
	// domain (empty if unknown), ip, port and proto (tcp or udp), which
	// net events blocked or flagged in the kernel carry.
	EgressReason(domain string, ip netip.Addr, port uint16, proto string) string
}

// WithEgress enforces the egress policy p in the kernel: a connect or UDP
// send from a watched cgroup that p blocks fails with EPERM and is
// recorded with verdict blocked; a flagged one (a DoH endpoint with
// doh_action flag) goes through with verdict flagged. Domains are known to
// the kernel through LearnDomain. Without it, or with a nil p, everything
// is allowed and recorded.
func WithEgress(p EgressPolicy) Option {
	return func(o *options) error {
		o.egress = p
		return nil
	}
}

// WithUnixAllowed allows every session to connect and send to the unix
// socket addresses addrs (egress.ParseUnixEntry syntax) whatever the egress
// policy's unix default says: the daemon's own sockets that sessions must
// reach (the ingest socket, the apt broker's). New fails for an address
// that does not parse.
func WithUnixAllowed(addrs ...string) Option {
	return func(o *options) error {
		for _, a := range addrs {
			if _, err := egress.ParseUnixEntry(a); err != nil {
				return err
			}
		}
		o.unixAllowed = append(o.unixAllowed, addrs...)
		return nil
	}
}

// WithDomainLookup sets the function that names an address in net events
// (net.domain), typically the DNS proxy's address-to-domain map. It is
// called from the reader goroutine and must not block. Without it, the
// domain most recently given to LearnDomain for the address is used.
func WithDomainLookup(f func(netip.Addr) string) Option {
	return func(o *options) error {
		o.domainLookup = f
		return nil
	}
}

// WithSensitiveReads records file reads (opens without write access) beneath
// the absolute paths in prefixes, except beneath the paths in exceptions:
// the nearest listed ancestor of the file decides, so an exception inside a
// prefix is not recorded and a prefix inside an exception is. "/" makes every
// read sensitive. Paths that do not exist yet are matched when they appear,
// by the kernel at the open (up to 8 missing components beneath an existing
// directory; deeper, by path when the record is decoded).
// AddSensitive adds rules for one session. Without any rule no read is
// recorded; writes, creates (of directories too), deletes, renames, links,
// truncates, chmods and mounts are recorded everywhere. It returns an error for a relative path.
func WithSensitiveReads(prefixes, exceptions []string) Option {
	return func(o *options) error {
		if err := checkAbs(prefixes, exceptions); err != nil {
			return err
		}
		o.sensitive = append(o.sensitive, prefixes...)
		o.readExceptions = append(o.readExceptions, exceptions...)
		return nil
	}
}

// WithMergeWindow sets how long identical file operations of one process
// (same kind, path, flags and result) are merged: the first is sent at once,
// the repeats within the window become one event whose file.count says how
// many it stands for. 0 turns merging off. The default is one second.
func WithMergeWindow(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("merge window %v: must not be negative", d)
		}
		o.mergeWindow = d
		return nil
	}
}

// MaxExecEnv is the most environment variable names WithExecEnv accepts.
const MaxExecEnv = 128

// WithExecEnv records, at every exec, the NAME=value entries of the new
// program's environment whose names are listed (exact, case-sensitive
// names), redacted with event.Redact, in proc.env. The kernel copies the
// first 16 KiB of the environment only when names is not empty; a longer
// environment sets proc.env_truncated. It returns an error for an empty
// name, one holding '=' or NUL, or more than MaxExecEnv names.
func WithExecEnv(names []string) Option {
	return func(o *options) error {
		if len(o.execEnv)+len(names) > MaxExecEnv {
			return fmt.Errorf("exec env: %d names, want at most %d", len(o.execEnv)+len(names), MaxExecEnv)
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return fmt.Errorf("exec env name %q: must be non-empty, without '=' or NUL", n)
			}
		}
		o.execEnv = append(o.execEnv, names...)
		return nil
	}
}

// checkAbs returns an error for a path in lists that is not absolute.
func checkAbs(lists ...[]string) error {
	for _, l := range lists {
		for _, p := range l {
			if !strings.HasPrefix(p, "/") {
				return fmt.Errorf("sensitive read path %q: not absolute", p)
			}
		}
	}
	return nil
}

func buildOptions(opts []Option) (options, error) {
	o := options{
		ringSize:     DefaultRingBufferSize,
		queueSize:    DefaultQueueSize,
		lossInterval: DefaultLossInterval,
		drainTimeout: DefaultDrainTimeout,
		wakeupBytes:  -1,
		poll:         DefaultPollInterval,
		mergeWindow:  DefaultMergeWindow,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, fmt.Errorf("applying option: %w", err)
		}
	}
	if o.wakeupBytes < 0 {
		o.wakeupBytes = min(o.ringSize/8, DefaultWakeupBytes)
	}
	if o.wakeupBytes >= o.ringSize {
		return o, fmt.Errorf("wake-up bytes %d: must be below the ring buffer size %d", o.wakeupBytes, o.ringSize)
	}
	return o, nil
}
