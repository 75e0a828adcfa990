package session

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// Limit types and actions written into limit.hit events (record/event's).
const (
	LimitCPU     = event.LimitCPU
	LimitMemory  = event.LimitMemory
	LimitPids    = event.LimitPids
	LimitDisk    = event.LimitDisk
	LimitTimeout = event.LimitTimeout

	ActionThrottle = event.ActionThrottle
	ActionKill     = event.ActionKill
	ActionWarn     = event.ActionWarn
)

// Rate limits and bounds of the monitor.
const (
	// cpuEvery is the least time between two cpu_throttle events of a
	// session; each carries the throttled time since the one before.
	cpuEvery = 5 * time.Second
	// pidsEvery is the least time between two pids events of a session.
	pidsEvery = time.Second
	// diskEvery is the least time between two disk_quota events of a
	// session.
	diskEvery = time.Second
	// oomGrace is how long a counted OOM kill waits for its victim's pid
	// (from the collector hook, the kernel log or the main process's wait
	// status) before it is reported without one.
	oomGrace = 2 * time.Second
)

// monitor watches one session's limits. poll runs every poll interval on
// the session's monitor goroutine, and once more at termination; the wait
// goroutine calls oomKilled. mu orders them. victim runs on the collector's
// goroutine and only queues.
type monitor struct {
	s *Session

	mu     sync.Mutex
	closed bool
	k      *kmsg
	memRel string
	// last holds the counters as of the previous poll.
	last stats
	// oomSeen counts OOM kills seen in the counters; oomEmitted counts
	// memory_oom events emitted. Their difference is waiting for a pid.
	oomSeen, oomEmitted int64
	oomPendingSince     time.Time
	victims             map[int32]bool
	victimq             chan victimReport
	victimDrops         atomic.Uint64
	pidsLastEmit        time.Time
	pidsPending         bool
	cpuBase             int64
	cpuLastEmit         time.Time
	diskLastEmit        time.Time
	diskFull            bool
}

func (m *monitor) init(s *Session) {
	m.s = s
	m.victims = map[int32]bool{}
	m.victimq = make(chan victimReport, 256)
	m.memRel = s.cg.memRel()
	if m.memRel != "" {
		k, err := openKmsg()
		if err != nil {
			s.log.Debug("kernel log unavailable, oom victims come from the collector and wait status only", "error", err)
		} else {
			m.k = k
		}
	}
	m.last = s.cg.readStats()
	m.cpuBase = max(m.last.throttledUsec, 0)
}

func (m *monitor) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.k != nil {
		m.k.close()
		m.k = nil
	}
}

// run polls until the session stops it, and fires the timeout.
func (m *monitor) run() {
	defer close(m.s.monDone)
	t := time.NewTicker(m.s.m.poll)
	defer t.Stop()
	var timeout <-chan time.Time
	if ms := m.s.spec.Limits.TimeoutMS; ms > 0 {
		tm := time.NewTimer(time.Until(m.s.startedAt.Add(time.Duration(ms) * time.Millisecond)))
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		select {
		case <-m.s.stopMon:
			return
		case <-t.C:
			m.poll(false)
		case <-timeout:
			m.fireTimeout()
		}
	}
}

// kill terminates the session for reason on its own goroutine, so that
// the monitor never waits for the termination that stops it.
func (m *monitor) kill(reason string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.s.terminate(ctx, reason, nil); err != nil {
			m.s.log.Error("terminating session on a limit", "reason", reason, "error", err)
		}
	}()
}

func (m *monitor) fireTimeout() {
	m.mu.Lock()
	lim := m.s.spec.Limits
	elapsed := time.Since(m.s.startedAt).Milliseconds()
	m.emit(&event.Limit{Type: LimitTimeout, Measured: elapsed, Configured: lim.TimeoutMS, Unit: "ms", Action: ActionKill}, nil)
	m.mu.Unlock()
	m.kill(ReasonTimeout)
}

func (m *monitor) emit(l *event.Limit, p *event.Proc) {
	m.s.m.emit(m.s.toEvent(change{limit: l, proc: p}))
}

// collect reads the counters and the kernel log, reports the victims it
// finds, and returns the counters. mu is held.
func (m *monitor) collect() stats {
	st := m.s.cg.readStats()
	for drained := false; !drained; {
		select {
		case v := <-m.victimq:
			m.victimLocked(v.pid, v.comm, st)
		default:
			drained = true
		}
	}
	if m.k != nil {
		for _, o := range m.k.oomKills() {
			if o.TaskMemcg == m.memRel || strings.HasPrefix(o.TaskMemcg, m.memRel+"/") {
				m.victimLocked(o.Pid, o.Task, st)
			}
		}
	}
	if st.oomKill > m.last.oomKill && m.last.oomKill >= 0 {
		m.oomSeen += st.oomKill - m.last.oomKill
	}
	if st.oomKill >= 0 {
		m.last.oomKill = st.oomKill
	}
	return st
}

// poll reads the counters once and emits the limit hits they show. final
// is the last poll, at termination: it reports OOM kills still waiting
// for a pid, and starts no termination.
func (m *monitor) poll(final bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	now := time.Now()
	lim := m.s.spec.Limits
	st := m.collect()

	if pending := m.oomSeen - m.oomEmitted; pending > 0 {
		if m.oomPendingSince.IsZero() {
			m.oomPendingSince = now
		}
		if final || now.Sub(m.oomPendingSince) >= oomGrace {
			for range pending {
				m.emit(&event.Limit{Type: LimitMemory, Measured: max(st.memPeak, 0), Configured: lim.MemoryBytes, Unit: "bytes", Action: ActionKill}, nil)
			}
			m.oomEmitted = m.oomSeen
			m.oomPendingSince = time.Time{}
		}
	} else {
		m.oomPendingSince = time.Time{}
	}

	if st.pidsEvents > m.last.pidsEvents && m.last.pidsEvents >= 0 {
		m.pidsPending = true
	}
	if st.pidsEvents >= 0 {
		m.last.pidsEvents = st.pidsEvents
	}
	if m.pidsPending && (final || now.Sub(m.pidsLastEmit) >= pidsEvery) {
		m.emit(&event.Limit{Type: LimitPids, Measured: max(st.pidsCurrent, 0), Configured: lim.Pids, Unit: "count", Action: ActionThrottle}, nil)
		m.pidsPending, m.pidsLastEmit = false, now
	}

	if d := st.throttledUsec - m.cpuBase; st.throttledUsec >= 0 && d > 0 && (final || now.Sub(m.cpuLastEmit) >= cpuEvery) {
		var conf int64
		if lim.CPUs > 0 {
			conf = cpuQuota(lim.CPUs)
		}
		m.emit(&event.Limit{Type: LimitCPU, Measured: d, Configured: conf, Unit: "usec", Action: ActionThrottle}, nil)
		m.cpuBase, m.cpuLastEmit = st.throttledUsec, now
	}

	if lim.DiskBytes > 0 {
		m.pollDisk(now, final)
	}
}

// pollDisk emits disk_quota when the session's filesystem has become full
// since the last poll, at most once per diskEvery. The kernel has already
// refused the write (ENOSPC); the session goes on.
func (m *monitor) pollDisk(now time.Time, final bool) {
	used, size, err := m.s.fs.usage()
	if err != nil {
		m.s.log.Warn("measuring session filesystem", "error", err)
		return
	}
	full := diskFull(used, size)
	if full && !m.diskFull && (final || now.Sub(m.diskLastEmit) >= diskEvery) {
		m.emit(&event.Limit{Type: LimitDisk, Measured: used, Configured: m.s.spec.Limits.DiskBytes, Unit: "bytes", Action: ActionThrottle}, nil)
		m.diskFull, m.diskLastEmit = true, now
	} else if !full {
		m.diskFull = false
	}
}

// diskFull reports whether a filesystem of size bytes with used bytes in
// use has no room left for a write: less than a page free.
func diskFull(used, size int64) bool {
	return size-used < 4096
}

// victim queues a report that pid was killed by the OOM killer, for the
// next poll. It never blocks: a full queue drops the report (the kill is
// still counted, and reported without its pid).
func (m *monitor) victim(pid int32, comm string) {
	select {
	case m.victimq <- victimReport{pid: pid, comm: comm}:
	default:
		m.victimDrops.Add(1)
	}
}

type victimReport struct {
	pid  int32
	comm string
}

func (m *monitor) victimLocked(pid int32, comm string, st stats) {
	if pid <= 0 || m.victims[pid] {
		return
	}
	m.victims[pid] = true
	m.oomEmitted++
	m.emit(&event.Limit{Type: LimitMemory, Measured: max(st.memPeak, 0), Configured: m.s.spec.Limits.MemoryBytes, Unit: "bytes", Action: ActionKill},
		&event.Proc{Pid: pid, Comm: comm, CgroupID: m.s.cg.id})
}

// oomKilled reports whether the main process pid, which died of SIGKILL,
// was an OOM victim: named so by the collector or the kernel log, or, when
// neither named it, because an OOM kill of the session is still waiting
// for its victim (the kernel counts the kill before it sends the signal).
func (m *monitor) oomKilled(pid int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	st := m.collect()
	if m.victims[pid] {
		return true
	}
	if m.oomSeen > m.oomEmitted {
		m.victimLocked(pid, "", st)
		return true
	}
	return false
}
