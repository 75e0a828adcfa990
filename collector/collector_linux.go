//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

const (
	btfPath     = "/sys/kernel/btf/vmlinux"
	tracefsPath = "/sys/kernel/tracing"
	// unwatchGrace is how long the session id of an unwatched cgroup is
	// still known, for the records already in the ring buffer.
	unwatchGrace = 10 * time.Second
)

// Collector is a loaded and attached set of BPF process programs and the
// goroutine that reads their ring buffer.
type Collector struct {
	log  hclog.Logger
	opts options

	objs processObjects
	// file, net and rate are the BPF objects beyond process.c (parts).
	file  fileCollector
	net   netCollector
	unix  unixCollector
	rate  rateCollector
	deny  denyCollector
	progs []progKind // every loaded program and the kind it loses
	links []link.Link
	rd    *ringbuf.Reader
	out   chan *event.Event
	dec   decoder
	// hash puts the executed file's sha256 on exec events.
	hash *exeHasher
	done chan struct{}
	// closing is closed when Close starts.
	closing chan struct{}

	mu        sync.RWMutex
	sessions  map[uint64]string
	removed   map[uint64]time.Time
	closed    bool
	final     Stats // program counters at Close
	haveFinal bool

	closeOnce sync.Once
	// closeFlushed is set when Close flushes the ring buffer to stop the
	// reader; a flush before it is a Sync's.
	closeFlushed atomic.Bool
	// syncs are the Syncs for the reader to take; sent counts the events
	// sent on out.
	syncs chan *syncWait
	sent  atomic.Uint64

	received, kernelDrops, queueDrops, decodeErrors atomic.Uint64

	// Owned by the reader goroutine.
	counters    []*lossCounter // the kernel's drop counters (set by load)
	lost        map[lossKey]uint64
	cgDrops     cgroupDrops
	batch       []*event.Event // events read and not yet sent (emit)
	seenMisses  map[*ebpf.Program]uint64
	nextAccount time.Time
	// waiting are the Syncs taken; readBytes counts the ring buffer's
	// bytes read, heldIn and heldOut the events into and out of held.
	waiting         []*syncWait
	readBytes       uint64
	heldIn, heldOut uint64

	// held are the events waiting behind an exec being hashed, in order;
	// hashing, the held execs still waiting (true once hashed); late,
	// the execs sent without their hash, whose process.exe_hash follows.
	held    []heldEvent
	hashing map[*event.Event]bool
	late    map[*event.Event]bool

	// kernel is what the collector uses of the kernel (Kernel).
	kernel *event.Kernel
}

// lossKey is what one collector.loss event reports lost: the session ("" for
// a host-wide loss, whose session cannot be known), the kind and the source.
type lossKey struct{ session, kind, source string }

// lossCounter follows one per-CPU drop counter of a BPF map.
type lossCounter struct {
	m      *ebpf.Map
	key    uint32
	kind   string // the lost kind reported
	source string // the loss source reported
	seen   uint64 // the kernel's sum already counted
}

// read returns what the kernel counted since the last read.
func (l *lossCounter) read() (uint64, error) {
	var per []uint64
	if err := l.m.Lookup(l.key, &per); err != nil {
		return 0, fmt.Errorf("reading drop counter (%s, %s): %w", l.kind, l.source, err)
	}
	var sum uint64
	for _, v := range per {
		sum += v
	}
	d := sum - l.seen
	l.seen = sum
	return d, nil
}

// cgroupDrops follows the kernel's ring-buffer drops per watched cgroup
// (cgroup_drops, shared.h), so that a session's losses are reported as its
// own; what the per-kind counters hold beyond them is host-wide.
type cgroupDrops struct {
	seen map[processDropKey]uint64
	// own counts, per kind, the drops reported for a session so far;
	// host, the host-wide ones.
	own, host [numKinds]uint64
}

// progKind is a loaded program and the record kind lost when the kernel
// skips one of its runs (a recursion miss).
type progKind struct {
	p *ebpf.Program
	k processEventKind
}

// A part is one BPF object beyond process.c (file.c, net.c). It loads with
// the maps of process.c that every object shares (shared.h), attaches its
// programs, and names them and its own drop counters for the loss
// accounting. close is safe on a part that was never loaded.
type part interface {
	load(c *Collector, shared *ebpf.CollectionOptions) error
	attach(c *Collector) error
	programs() []progKind
	counters() []*lossCounter
	close()
}

func (c *Collector) parts() []part { return []part{&c.file, &c.net, &c.unix, &c.rate, &c.deny} }

// New checks the kernel features the collector needs, loads the BPF
// programs, attaches them and starts reading. It returns ErrPermission without
// the privileges to load BPF, and ErrNotSupported when a kernel feature is
// missing; the error says which. The caller must Close the collector.
func New(log hclog.Logger, opts ...Option) (*Collector, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("collector")
	if err := privileged(); err != nil {
		return nil, err
	}
	// Before Linux 5.11 BPF memory counts against RLIMIT_MEMLOCK; later
	// kernels account it to the cgroup, and this does nothing.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raising RLIMIT_MEMLOCK for BPF maps: %v", ErrNotSupported, err)
	}
	loadOverlay()
	kernel := probeKernel()
	if err := requiredMissing(kernel); err != nil {
		return nil, err
	}
	if err := ensureTracefs(log); err != nil {
		return nil, err
	}
	off, err := bootOffset()
	if err != nil {
		return nil, err
	}

	c := &Collector{
		log:      log,
		opts:     o,
		out:      make(chan *event.Event, o.queueSize),
		done:     make(chan struct{}),
		closing:  make(chan struct{}),
		syncs:    make(chan *syncWait, 64),
		sessions: make(map[uint64]string),
		removed:  make(map[uint64]time.Time),
		lost:     make(map[lossKey]uint64),
		kernel:   kernel,
		hashing:  make(map[*event.Event]bool),
		late:     make(map[*event.Event]bool),
	}
	c.dec = decoder{bootOffset: off, host: o.host, session: c.session, env: envNames{}, lineage: newLineage()}
	for _, n := range o.execEnv {
		c.dec.env[n] = struct{}{}
	}

	t0 := time.Now()
	if err := c.load(); err != nil {
		c.teardown()
		return nil, err
	}
	loaded := time.Now()
	rd, err := ringbuf.NewReader(c.objs.Events)
	if err != nil {
		c.teardown()
		return nil, fmt.Errorf("opening ring buffer reader: %w", err)
	}
	c.rd = rd
	if err := c.attach(); err != nil {
		c.teardown()
		return nil, err
	}
	c.hash = newExeHasher()
	log.Debug("collector started", "load", loaded.Sub(t0), "attach", time.Since(loaded), "links", len(c.links), "ring_buffer_bytes", o.ringSize, "queue", o.queueSize, "host_wide", o.hostWide, "wakeup_bytes", o.wakeupBytes, "poll", o.poll)
	go c.run()
	return c, nil
}

// privileged checks that the process may load BPF programs.
func privileged() error {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if !has(unix.CAP_SYS_ADMIN) && !(has(unix.CAP_BPF) && has(unix.CAP_PERFMON)) {
		return fmt.Errorf("%w: loading BPF programs needs root, or CAP_BPF and CAP_PERFMON", ErrPermission)
	}
	return nil
}

// ensureTracefs mounts tracefs at /sys/kernel/tracing when it is not mounted
// there, for the syscall tracepoints. It is left mounted: others may use it.
func ensureTracefs(log hclog.Logger) error {
	var st unix.Statfs_t
	if err := unix.Statfs(tracefsPath, &st); err == nil && st.Type == unix.TRACEFS_MAGIC {
		return nil
	}
	if err := unix.Mount("tracefs", tracefsPath, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%w: mounting tracefs at %s: %v", ErrNotSupported, tracefsPath, err)
	}
	log.Info("mounted tracefs", "path", tracefsPath)
	return nil
}

// bootOffset measures CLOCK_REALTIME - CLOCK_BOOTTIME, taking the reading
// whose CLOCK_BOOTTIME bracket around CLOCK_REALTIME is the narrowest.
func bootOffset() (int64, error) {
	best := int64(-1)
	var off int64
	for range 64 {
		var b1, r, b2 unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b1); err != nil {
			return 0, fmt.Errorf("reading CLOCK_BOOTTIME: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r); err != nil {
			return 0, fmt.Errorf("reading CLOCK_REALTIME: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b2); err != nil {
			return 0, fmt.Errorf("reading CLOCK_BOOTTIME: %w", err)
		}
		gap := b2.Nano() - b1.Nano()
		if best < 0 || gap < best {
			best = gap
			off = r.Nano() - (b1.Nano() + gap/2)
		}
	}
	return off, nil
}

// load loads process.c and the parts. The verifier's work is most of a
// collector's start (process.c's handle_exec and file.c's file_exit check
// about 370,000 instructions each), and it runs on the loading thread: so
// the maps that every object shares are made first, and process.c,
// file.c and the rest (net.c before unix.c and rate.c, which use its
// maps) load at the same time, on as many CPUs.
func (c *Collector) load() error {
	spec, err := c.processSpec()
	if err != nil {
		return err
	}
	shared, err := sharedMaps(spec)
	if err != nil {
		return err
	}
	defer func() {
		for _, m := range shared.MapReplacements {
			m.Close() // the objects hold their own copies
		}
	}()
	chains := [][]part{{&c.file}, {&c.net, &c.unix, &c.rate, &c.deny}}
	errs := make([]error, len(chains)+1)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = c.loadProcess(spec, shared) })
	for i, ps := range chains {
		wg.Go(func() { errs[i+1] = c.loadParts(ps, shared) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, p := range c.parts() {
		c.progs = append(c.progs, p.programs()...)
		c.counters = append(c.counters, p.counters()...)
	}
	return nil
}

// processSpec is process.c's spec for this kernel, with its maps sized.
func (c *Collector) processSpec() (*ebpf.CollectionSpec, error) {
	load := loadProcess
	if !has(c.kernel, event.CapBTFCast) {
		load = loadProcessCompat
	}
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("loading bpf spec: %w", err)
	}
	spec.Maps[processMapEvents].MaxEntries = uint32(c.opts.ringSize)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("counting possible cpus: %w", err)
	}
	spec.Maps[processMapExecScratch].MaxEntries = uint32(ncpu)
	return spec, nil
}

// sharedProcessMaps are process.c's maps that every object uses
// (shared.h).
var sharedProcessMaps = []string{processMapEvents, processMapDrops, processMapCgroupDrops, processMapWatched,
	processMapSettings, processMapWokenAt}

// sharedMaps makes the maps of sharedProcessMaps from process.c's spec,
// for every object to load with. The caller closes them.
func sharedMaps(spec *ebpf.CollectionSpec) (*ebpf.CollectionOptions, error) {
	shared := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	for _, name := range sharedProcessMaps {
		m, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			for _, m := range shared.MapReplacements {
				m.Close()
			}
			return nil, fmt.Errorf("creating bpf map %s: %w", name, err)
		}
		shared.MapReplacements[name] = m
	}
	return shared, nil
}

// loadProcess loads process.c with the shared maps and writes its
// settings.
func (c *Collector) loadProcess(spec *ebpf.CollectionSpec, shared *ebpf.CollectionOptions) error {
	t0 := time.Now()
	if err := spec.LoadAndAssign(&c.objs, shared); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading bpf objects: %w", err)
	}
	c.log.Debug("bpf object loaded", "object", "process", "took", time.Since(t0))
	var on uint32
	if c.opts.hostWide {
		on = 1
	}
	if err := c.objs.Settings.Put(uint32(processConfigKeyCONFIG_HOST_WIDE), on); err != nil {
		return fmt.Errorf("writing host-wide setting: %w", err)
	}
	if err := c.objs.Settings.Put(uint32(processConfigKeyCONFIG_WAKEUP_BYTES), uint32(c.opts.wakeupBytes)); err != nil {
		return fmt.Errorf("writing wake-up setting: %w", err)
	}
	var env uint32
	if len(c.opts.execEnv) > 0 {
		env = 1
	}
	if err := c.objs.Settings.Put(uint32(processConfigKeyCONFIG_EXEC_ENV), env); err != nil {
		return fmt.Errorf("writing exec env setting: %w", err)
	}
	c.progs = []progKind{
		{c.objs.HandleExec, processEventKindKIND_EXEC},
		{c.objs.HandleFork, processEventKindKIND_FORK},
		{c.objs.HandleExit, processEventKindKIND_EXIT},
		{c.objs.HandleOomVictim, processEventKindKIND_OOM_VICTIM},
		// A missed exit of execve loses its exec_failed, if it failed.
		{c.objs.ExitExecve, processEventKindKIND_EXEC_FAILED},
		{c.objs.ExitExecveat, processEventKindKIND_EXEC_FAILED},
	}
	for k := 1; k < numKinds; k++ {
		c.counters = append(c.counters, &lossCounter{m: c.objs.Drops, key: uint32(k), kind: kindName[k], source: LossSourceRingbuf})
	}
	return nil
}

// loadParts loads the parts ps, in order, with the shared maps; it stops
// at the first that fails.
func (c *Collector) loadParts(ps []part, shared *ebpf.CollectionOptions) error {
	for _, p := range ps {
		t0 := time.Now()
		if err := p.load(c, shared); err != nil {
			return err
		}
		c.log.Debug("bpf object loaded", "object", strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", p), "*collector."), "Collector"),
			"took", time.Since(t0))
	}
	return nil
}

// verifierError logs the verifier's log of a failed load at debug level.
func (c *Collector) verifierError(err error) {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		c.log.Debug("verifier log", "log", fmt.Sprintf("%+v", verr))
	}
}

func (c *Collector) attach() error {
	for _, p := range []*ebpf.Program{c.objs.HandleExec, c.objs.HandleFork, c.objs.HandleExit, c.objs.HandleOomVictim} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("%w: attaching tp_btf program %s: %v", ErrNotSupported, p, err)
		}
		c.links = append(c.links, l)
	}
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"sys_exit_execve", c.objs.ExitExecve},
		{"sys_exit_execveat", c.objs.ExitExecveat},
	} {
		l, err := link.Tracepoint("syscalls", tp.name, tp.prog, nil)
		if err != nil {
			return fmt.Errorf("%w: attaching tracepoint syscalls/%s: %v", ErrNotSupported, tp.name, err)
		}
		c.links = append(c.links, l)
	}
	for _, p := range c.parts() {
		if err := p.attach(c); err != nil {
			return err
		}
	}
	return nil
}

// teardown detaches and unloads everything. It is safe on a partly built
// collector.
func (c *Collector) teardown() {
	c.detach()
	if c.rd != nil {
		c.rd.Close()
	}
	for _, p := range c.parts() {
		p.close()
	}
	c.objs.Close()
}

// detach closes every link at once. Each tracepoint's detach waits for the
// kernel's RCU grace periods (tracepoint_synchronize_unregister, about
// 45 ms here): one after the other, the 50-odd links took 2.5 s; closed
// concurrently, they share the grace periods. A program is detached when
// detach returns.
func (c *Collector) detach() {
	var wg sync.WaitGroup
	for _, l := range c.links {
		wg.Go(func() { l.Close() })
	}
	wg.Wait()
	c.links = nil
}

// Watch records the processes in the v2 cgroup cgroupID (the inode number of
// its directory), and in the cgroups nested in it up to 8 levels down, as
// session sessionID. It returns ErrClosed after Close, and an error for id 0,
// a session id that is empty or longer than 128 bytes, or a full table (4096
// cgroups).
func (c *Collector) Watch(cgroupID uint64, sessionID string) error {
	if cgroupID == 0 {
		return fmt.Errorf("watching cgroup: id 0 is not a cgroup")
	}
	if sessionID == "" || len(sessionID) > 128 {
		return fmt.Errorf("watching cgroup %d: session id must be 1 to 128 bytes, got %d", cgroupID, len(sessionID))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	// The session id is known before the kernel starts recording.
	c.sessions[cgroupID] = sessionID
	delete(c.removed, cgroupID)
	if err := c.objs.Watched.Put(cgroupID, uint8(processWatchFlagsWATCH_ON)); err != nil {
		delete(c.sessions, cgroupID)
		return fmt.Errorf("watching cgroup %d: %w", cgroupID, err)
	}
	return nil
}

// Unwatch stops recording the cgroup cgroupID and clears its DNS redirect
// (RedirectDNS), its sensitive read paths (AddSensitive) and its net rate
// (SetNetRate, whose last burst is still reported). Events already recorded keep their session id.
func (c *Collector) Unwatch(cgroupID uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.objs.Watched.Delete(cgroupID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unwatching cgroup %d: %w", cgroupID, err)
	}
	if _, ok := c.sessions[cgroupID]; ok {
		c.removed[cgroupID] = time.Now()
	}
	c.rate.forget(cgroupID)
	return errors.Join(c.net.unredirect(cgroupID), c.file.forget(cgroupID))
}

// DenyUserNamespaces makes the kernel kill, before it runs, any child that
// a process of the session watched as cgroupID creates in a new user
// namespace, and record it as process.denied of clone3. It is the part of
// the session's seccomp filter that the filter cannot do: clone3 takes its
// flags behind a pointer. It returns an error when the cgroup is not
// watched, and ErrClosed after Close.
func (c *Collector) DenyUserNamespaces(cgroupID uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if _, ok := c.sessions[cgroupID]; !ok {
		return fmt.Errorf("denying user namespaces: cgroup %d is not watched", cgroupID)
	}
	if err := c.objs.Watched.Put(cgroupID, uint8(processWatchFlagsWATCH_ON|processWatchFlagsWATCH_DENY_USERNS)); err != nil {
		return fmt.Errorf("denying user namespaces to cgroup %d: %w", cgroupID, err)
	}
	return nil
}

func (c *Collector) session(watched uint64) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sessions[watched]
}

// Events returns the channel of events. It is closed after Close, once the
// last events and the final collector.loss events are in it.
func (c *Collector) Events() <-chan *event.Event { return c.out }

// Stats returns the counters. After Close, the BPF program counters are
// those at Close.
func (c *Collector) Stats() Stats {
	c.mu.RLock()
	s, have := c.final, c.haveFinal
	c.mu.RUnlock()
	if !have {
		s = c.progStats()
	}
	s.Received = c.received.Load()
	s.KernelDrops = c.kernelDrops.Load()
	s.QueueDrops = c.queueDrops.Load()
	s.DecodeErrors = c.decodeErrors.Load()
	s.LineageEvicted = c.dec.lineage.Evicted()
	return s
}

// progStats sums the kernel's counters of the programs.
func (c *Collector) progStats() Stats {
	var s Stats
	for _, pk := range c.progs {
		if pk.p == nil {
			continue
		}
		ps, err := pk.p.Stats()
		if err != nil {
			continue
		}
		s.BPFRunTime += ps.Runtime
		s.BPFRuns += ps.RunCount
		s.BPFMisses += ps.RecursionMisses
	}
	return s
}

// Close detaches the programs, delivers what is left in the ring buffer and
// the final loss counts (waiting at most the drain timeout for the consumer),
// closes the Events channel and unloads the programs.
func (c *Collector) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.closing)
		t0 := time.Now()
		c.detach()
		t1 := time.Now()
		// Read what is in the ring buffer, then stop.
		c.closeFlushed.Store(true)
		c.rd.Flush()
		<-c.done
		t2 := time.Now()
		c.hash.close()
		final := c.progStats()
		c.mu.Lock()
		c.final, c.haveFinal = final, true
		c.mu.Unlock()
		c.teardown()
		c.log.Debug("collector closed", "detach", t1.Sub(t0), "drain", t2.Sub(t1), "unload", time.Since(t2))
	})
	return nil
}

// run is the reader goroutine.
func (c *Collector) run() {
	defer close(c.done)
	defer close(c.out)
	if c.opts.gate != nil {
		select {
		case <-c.opts.gate:
		case <-c.closing:
		}
	}
	var rec ringbuf.Record
	c.nextAccount = time.Now().Add(c.opts.lossInterval)
	c.batch = append(c.batch, c.capabilitiesEvent())
	for {
		now := time.Now()
		if now.After(c.nextAccount) {
			c.account(false)
		}
		c.file.tick(c, now) // send merged file events whose window ended
		c.drainHashes()
		c.releaseHeld(now, false)
		c.rate.tick(c, now) // net_rate limit hits
		c.takeSyncs()
		if len(c.batch) > 0 && c.rd.AvailableBytes() == 0 {
			c.flushBatch() // the burst is read: hand it over before waiting
		}
		c.settleSyncs()
		c.rd.SetDeadline(c.pollDeadline(now))
		err := c.rd.ReadInto(&rec)
		switch {
		case err == nil:
			c.read(rec.RawSample)
			c.handle(rec.RawSample)
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrFlushed) && !c.closeFlushed.Load():
			// A Sync woke the reader.
		case errors.Is(err, ringbuf.ErrFlushed) && c.rd.AvailableBytes() > 0:
			// A program that was already running when its link closed
			// wrote after the flush.
			c.rd.Flush()
		case errors.Is(err, ringbuf.ErrFlushed), errors.Is(err, ringbuf.ErrClosed):
			c.finishHashes()
			c.account(true)
			return
		default:
			c.log.Error("reading ring buffer", "error", err)
			c.finishHashes()
			c.account(true)
			return
		}
	}
}

func (c *Collector) handle(raw []byte) {
	c.received.Add(1)
	ev, oom, err := c.dec.toEvent(raw)
	if err != nil {
		c.decodeErrors.Add(1)
		c.log.Warn("dropping malformed record", "error", err)
		return
	}
	if oom != nil {
		if c.opts.oom != nil {
			id := oom.watched
			if id == 0 {
				id = oom.cgroup
			}
			c.opts.oom(id, oom.pid, oom.comm)
		}
		return
	}
	if ev == nil {
		return // a file read that is not sensitive
	}
	if ev.Kind == event.KindExec && !c.hash.fill(ev, c.dec.exe) {
		c.hold(ev, true) // its hash comes back from the hasher (drainHashes)
		return
	}
	// File events: repeats are merged (file_linux.go).
	if ev.File != nil && !c.file.merge(c, ev) {
		return
	}
	c.emit(ev)
}

// drainHashes takes the exec events whose hash is done: a held one is
// ready to go in its place (releaseHeld); one already sent without its
// hash (hashWait passed) is followed by its enrichment, process.exe_hash.
func (c *Collector) drainHashes() {
	for {
		select {
		case h := <-c.hash.done:
			c.hashed(h)
		default:
			return
		}
	}
}

// hashed takes an exec event back from the hasher and puts its sum on it.
func (c *Collector) hashed(h hashed) {
	ev := h.ev
	ev.Proc.ExeSHA256, ev.Proc.ExeSHA256Missing = h.sum, h.missing
	if _, ok := c.hashing[ev]; ok {
		c.hashing[ev] = true
		return
	}
	if c.late[ev] {
		delete(c.late, ev)
		c.emit(exeHashEvent(ev))
	}
}

// finishHashes waits, at most the drain timeout, for the exec events still
// being hashed, and sends every held event; those still waiting for a
// worker after it are counted as lost.
func (c *Collector) finishHashes() {
	t := time.NewTimer(c.opts.drainTimeout)
	defer t.Stop()
	for c.hash.pending() > 0 {
		select {
		case h := <-c.hash.done:
			c.hashed(h)
		case <-t.C:
			n := uint64(c.hash.pending())
			c.queueDrops.Add(n)
			// Their sessions are in the jobs the workers hold: host-wide.
			c.lost[lossKey{"", event.KindExec, LossSourceQueue}] += n
			c.releaseHeld(time.Time{}, true)
			return
		}
	}
	c.drainHashes()
	c.releaseHeld(time.Time{}, true)
}

// Cause before effect: events leave the collector in the order the kernel
// recorded them. An exec whose file is being hashed is held, and every
// event after it waits behind it (hold, releaseHeld), so that neither a
// child's exec nor the process's own file and network events reach the
// journal before it. An exec waits at most hashWait for its hash; then it
// goes without (proc.exe_sha256_missing "pending") and its hash follows as
// its own event, process.exe_hash, when it is done. At most
// maxHeldBehindHash events wait; beyond that the oldest exec goes the same
// way.
const maxHeldBehindHash = 16384

// hashWait is how long an exec waits for its hash (a variable: tests
// shorten it).
var hashWait = 100 * time.Millisecond

// heldEvent is an event waiting behind an exec that is being hashed.
type heldEvent struct {
	ev *event.Event
	// since is when an exec started to wait for its hash (zero for the
	// events behind it).
	since time.Time
}

// hold queues ev, an exec that waits for its hash when hashing is set,
// behind the events already held.
func (c *Collector) hold(ev *event.Event, hashing bool) {
	h := heldEvent{ev: ev}
	if hashing {
		h.since = time.Now()
		c.hashing[ev] = false
	}
	c.held = append(c.held, h)
	c.heldIn++
	if len(c.held) > maxHeldBehindHash {
		c.releaseHeld(time.Now(), false)
	}
}

// releaseHeld sends the held events from the front, up to the first exec
// still waiting for its hash within hashWait of now (all of them when all
// is set, or while more than maxHeldBehindHash wait). A waiting exec that
// goes is a copy without its hash: the original waits for the hasher, and its hash
// then follows as process.exe_hash (hashed).
func (c *Collector) releaseHeld(now time.Time, all bool) {
	n := 0
	for ; n < len(c.held); n++ {
		h := c.held[n]
		if !h.since.IsZero() {
			done := c.hashing[h.ev]
			if !done && !all && len(c.held)-n <= maxHeldBehindHash && now.Sub(h.since) < hashWait {
				break
			}
			delete(c.hashing, h.ev)
			if !done {
				c.late[h.ev] = true
				h.ev = withoutHash(h.ev)
			}
		}
		c.batch = append(c.batch, h.ev)
		c.heldOut++
		c.held[n] = heldEvent{}
		if len(c.batch) >= maxBatch {
			c.flushBatch()
		}
	}
	c.held = c.held[n:]
	if len(c.held) == 0 {
		c.held = nil
	}
}

// withoutHash is a copy of the exec event ev to send before its hash is
// done: the original is the one the hasher hands back.
func withoutHash(ev *event.Event) *event.Event {
	e := *ev
	p := *ev.Proc
	p.ExeSHA256, p.ExeSHA256Missing = "", HashPending
	e.Proc = &p
	return &e
}

// exeHashEvent is the process.exe_hash event that follows an exec sent
// without its hash: the process, the file and its hash (or why there is
// none).
func exeHashEvent(exec *event.Event) *event.Event {
	p := exec.Proc
	return &event.Event{V: event.SchemaVersion, TS: time.Now().UTC(), SessionID: exec.SessionID, Host: exec.Host,
		Kind: event.KindExeHash, Source: event.SourceKernel,
		Proc: &event.Proc{Pid: p.Pid, PPid: p.PPid, Comm: p.Comm, Exe: p.Exe, ExePath: p.ExePath, ExeDev: p.ExeDev,
			ExeIno: p.ExeIno, ExeSHA256: p.ExeSHA256, ExeSHA256Missing: p.ExeSHA256Missing, StartTS: p.StartTS,
			CgroupID: p.CgroupID}}
}

// maxBatch bounds the events the reader holds before handing them over.
const maxBatch = 256

// emit queues an event for the consumer. The reader hands events over a
// burst at a time (flushBatch: when the ring buffer is empty, or maxBatch
// are held): a consumer faster than the reader would otherwise park after
// every event and be woken by the next, a futex wake and a context switch
// per event.
func (c *Collector) emit(ev *event.Event) {
	if len(c.held) > 0 {
		c.hold(ev, false) // behind an exec being hashed
		return
	}
	c.batch = append(c.batch, ev)
	if len(c.batch) >= maxBatch {
		c.flushBatch()
	}
}

// flushBatch sends the held events without blocking; when the channel is
// full it counts the drop (a merged file event counts for every operation it
// stands for).
func (c *Collector) flushBatch() {
	var sent uint64
	defer func() { c.sent.Add(sent) }()
	for i, ev := range c.batch {
		c.batch[i] = nil
		select {
		case c.out <- ev:
			sent++
		default:
			n := uint64(1)
			if ev.File != nil && ev.File.Count > 1 {
				n = ev.File.Count
			}
			c.queueDrops.Add(n)
			c.lost[lossKey{ev.SessionID, ev.Kind, LossSourceQueue}] += n
		}
	}
	c.batch = c.batch[:0]
}

// account reads the kernel drop counters and sends collector.loss events for
// everything lost since the last report. A loss event that does not fit in
// the channel stays counted and is sent next time; on the final call it
// waits up to the drain timeout.
func (c *Collector) account(final bool) {
	c.nextAccount = time.Now().Add(c.opts.lossInterval)
	if final {
		c.file.flush(c, time.Time{}) // the held file merges, before the last losses
	}
	c.flushBatch() // the events before the losses counted now
	// Follow steps of the wall clock (NTP, settimeofday).
	if off, err := bootOffset(); err == nil {
		c.dec.bootOffset = off
	}
	// The per-kind counters before the per-cgroup ones (count_drop).
	for _, l := range c.counters {
		d, err := l.read()
		if err != nil {
			c.log.Error("reading drop counters", "error", err)
		}
		c.kernelDrops.Add(d)
		if l.source != LossSourceRingbuf {
			c.lost[lossKey{"", l.kind, l.source}] += d
		}
	}
	c.readCgroupDrops()
	c.hostDrops()
	c.expireSessions()
	if c.seenMisses == nil {
		c.seenMisses = make(map[*ebpf.Program]uint64)
	}
	for _, pk := range c.progs {
		ps, err := pk.p.Stats()
		if err != nil {
			continue
		}
		if d := ps.RecursionMisses - c.seenMisses[pk.p]; d > 0 {
			c.seenMisses[pk.p] = ps.RecursionMisses
			c.lost[lossKey{"", kindName[pk.k], LossSourceRecursion}] += d
		}
	}
	var deadline <-chan time.Time
	if final {
		t := time.NewTimer(c.opts.drainTimeout)
		defer t.Stop()
		deadline = t.C
	}
	for k, n := range c.lost {
		if left := c.sendLoss(k, n, deadline); left > 0 {
			c.lost[k] = left
		} else {
			delete(c.lost, k)
		}
	}
}

// readCgroupDrops adds what the kernel counted per watched cgroup since the
// last read to the losses of the cgroup's session. A cgroup whose session
// is no longer known is left to hostDrops.
func (c *Collector) readCgroupDrops() {
	cd := &c.cgDrops
	if cd.seen == nil {
		cd.seen = make(map[processDropKey]uint64)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var k processDropKey
	var v uint64
	it := c.objs.CgroupDrops.Iterate()
	for it.Next(&k, &v) {
		// The kernel never lowers a count (Go deletes keys: expireSessions).
		d := v - cd.seen[k]
		cd.seen[k] = v
		sid := c.sessions[k.Cgroup]
		if d == 0 || sid == "" || int(k.Kind) >= numKinds {
			continue
		}
		cd.own[k.Kind] += d
		c.lost[lossKey{sid, kindName[k.Kind], LossSourceRingbuf}] += d
	}
	if err := it.Err(); err != nil {
		c.log.Error("reading per-session drop counters", "error", err)
	}
}

// hostDrops reports as host-wide the ring-buffer drops of each kind beyond
// those reported for a session. The per-kind counters are read first and
// the kernel counts a drop's cgroup before its kind, so this never takes a
// session's drop for a host-wide one; what it has not yet attributed it
// reports at a later call.
func (c *Collector) hostDrops() {
	cd := &c.cgDrops
	for _, l := range c.counters {
		if l.source != LossSourceRingbuf {
			continue
		}
		if done := cd.own[l.key] + cd.host[l.key]; l.seen > done {
			cd.host[l.key] += l.seen - done
			c.lost[lossKey{"", l.kind, LossSourceRingbuf}] += l.seen - done
		}
	}
}

// expireSessions forgets the cgroups unwatched longer than unwatchGrace
// ago, with their per-cgroup drop counters.
func (c *Collector) expireSessions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, at := range c.removed {
		if time.Since(at) <= unwatchGrace {
			continue
		}
		delete(c.removed, id)
		delete(c.sessions, id)
		for k := range c.cgDrops.seen {
			if k.Cgroup == id {
				if err := c.objs.CgroupDrops.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					c.log.Error("deleting per-session drop counter", "error", err)
				}
				delete(c.cgDrops.seen, k)
			}
		}
	}
}

// sendLoss sends one loss event for k and returns what is still unreported.
func (c *Collector) sendLoss(k lossKey, n uint64, deadline <-chan time.Time) uint64 {
	if n == 0 {
		return 0
	}
	ev := &event.Event{
		V:         event.SchemaVersion,
		TS:        time.Now().UTC(),
		Host:      c.opts.host,
		SessionID: k.session,
		Kind:      event.KindLoss,
		Source:    event.SourceKernel,
		Loss:      &event.Loss{Count: n, Source: k.source, LostKind: k.kind, HostWide: k.session == ""},
	}
	if deadline == nil {
		select {
		case c.out <- ev:
			return 0
		default:
			return n
		}
	}
	select {
	case c.out <- ev:
		return 0
	case <-deadline:
		c.log.Error("consumer did not take the final loss event", "session", k.session, "lost_kind", k.kind, "source", k.source, "count", n)
		return n
	}
}
