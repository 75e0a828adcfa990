//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sandtrail/sandtrail/record/event"
)

// rateCollector is the network rate limit (bpf/rate.c): the cgroup_skb
// programs keep a token bucket per direction for each rate-limited cgroup,
// and tick turns their counters into limit.hit net_rate events, one per
// burst of traffic over the rate. The same programs count the UDP payload
// of the watched cgroups' sockets into net.c's udp_flows, which net.c
// records as net.close at each socket's release.
type rateCollector struct {
	objs   rateObjects
	loaded bool

	mu     sync.Mutex
	limits map[uint64]*rateState
	// next is when tick reads the counters next (UnixNano); forget sets
	// it to 0, so that a session's last burst is reported at once.
	next atomic.Int64
}

// rateState is what tick knows of one rate-limited cgroup.
type rateState struct {
	rate int64
	warn bool
	// gone is set by Unwatch: the next tick reports the last burst, and
	// the bucket stays until then, for the session's sockets that outlive
	// it (data still queued when its processes exited).
	gone  bool
	until time.Time
	at    time.Time
	dir   [2]burstState
}

// burstState follows one direction's counters from tick to tick.
type burstState struct {
	passed, over uint64
	// inBurst: the last interval had traffic over the rate. emitted: this
	// burst was reported. first is the rate measured in its first
	// interval, reported if the burst lasts no longer.
	inBurst, emitted bool
	first            int64
}

// Bounds of the rate limit.
const (
	// maxNetRate keeps the kernel's refill (elapsed ns × rate) within 64
	// bits: 16 GiB/s.
	maxNetRate = 1 << 34
	// minNetBurst is the least bucket: a few of loopback's 64 KiB
	// segments, so that a TCP window keeps flowing.
	minNetBurst = 256 << 10
	// rateInterval is how often the counters are read, and the interval
	// over which the measured rate is taken.
	rateInterval = time.Second
	// rateLinger is how long a cgroup's bucket outlives Unwatch.
	rateLinger = 2 * time.Minute
)

// Limit type, unit and actions of net_rate events (record/event's names).
const (
	limitNetRate   = event.LimitNetRate
	unitNetRate    = "B/s"
	actionThrottle = event.ActionThrottle
	actionWarn     = event.ActionWarn
)

// netBurst is the bucket size for rate bytes per second: an eighth of a
// second of traffic, and at least minNetBurst.
func netBurst(rate int64) uint64 { return uint64(max(rate/8, minNetBurst)) }

func (r *rateCollector) load(c *Collector, shared *ebpf.CollectionOptions) error {
	spec, err := loadRate()
	if err != nil {
		return fmt.Errorf("loading rate bpf spec: %w", err)
	}
	// The UDP byte counts: net.c's flows, of process.c's watched cgroups.
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		rateMapWatched: shared.MapReplacements[processMapWatched], rateMapUdpFlows: c.net.objs.UdpFlows}}
	if err := spec.LoadAndAssign(&r.objs, opts); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading rate bpf objects: %w", err)
	}
	r.loaded = true
	r.limits = make(map[uint64]*rateState)
	return nil
}

func (r *rateCollector) attach(c *Collector) error {
	return c.attachCgroupHooks(
		cgroupHook{prog: r.objs.RateIngress, typ: ebpf.AttachCGroupInetIngress},
		cgroupHook{prog: r.objs.RateEgress, typ: ebpf.AttachCGroupInetEgress})
}

// programs is empty: the rate programs write no records.
func (r *rateCollector) programs() []progKind { return nil }

func (r *rateCollector) counters() []*lossCounter { return nil }

func (r *rateCollector) close() {
	r.objs.Close()
	r.loaded = false
}

// set starts limiting cgroupID to rate bytes per second each way.
func (r *rateCollector) set(cgroupID uint64, rate int64, warn bool) error {
	v := rateNetRate{Rate: uint64(rate), Burst: netBurst(rate)}
	if warn {
		v.Warn = 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.objs.Rates.Put(cgroupID, v); err != nil {
		return fmt.Errorf("writing the net rate of cgroup %d: %w", cgroupID, err)
	}
	r.limits[cgroupID] = &rateState{rate: rate, warn: warn, at: time.Now()}
	return r.forgetUnlimited()
}

// forgetUnlimited removes the cgroups remembered as not rate-limited from
// rate_owner, so that the kernel walks up from them again and finds a rate
// set after their first packet.
func (r *rateCollector) forgetUnlimited() error {
	var id, owner uint64
	var stale []uint64
	it := r.objs.RateOwner.Iterate()
	for it.Next(&id, &owner) {
		if owner == 0 {
			stale = append(stale, id)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the rate owners: %w", err)
	}
	for _, id := range stale {
		if err := r.objs.RateOwner.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forgetting the rate owner of cgroup %d: %w", id, err)
		}
	}
	return nil
}

// forget has the reader's next tick, within its poll interval, report
// cgroupID's last burst; its bucket goes rateLinger later.
func (r *rateCollector) forget(cgroupID uint64) {
	if !r.loaded {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.limits[cgroupID]; ok {
		s.gone = true
		r.next.Store(0)
	}
}

// tick reads the counters every rateInterval and emits the limit hits
// they show. It runs on the reader goroutine.
func (r *rateCollector) tick(c *Collector, now time.Time) {
	if !r.loaded || now.UnixNano() < r.next.Load() {
		return
	}
	r.next.Store(now.Add(rateInterval).UnixNano())
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, s := range r.limits {
		if !s.until.IsZero() {
			if now.After(s.until) {
				r.remove(c, id)
			}
			continue
		}
		var v rateNetRate
		if err := r.objs.Rates.Lookup(id, &v); err != nil {
			c.log.Warn("reading net rate counters", "cgroup", id, "error", err)
			continue
		}
		for d := range s.dir {
			if l := s.dir[d].step(v.Dir[d], now.Sub(s.at), s.gone); l > 0 {
				c.emit(r.toEvent(c, id, s, l))
			}
		}
		s.at = now
		if s.gone {
			s.until = now.Add(rateLinger)
		}
	}
}

// remove deletes cgroupID's bucket. r.mu is held.
func (r *rateCollector) remove(c *Collector, cgroupID uint64) {
	if err := r.objs.Rates.Delete(cgroupID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		c.log.Warn("removing net rate", "cgroup", cgroupID, "error", err)
	}
	delete(r.limits, cgroupID)
}

// step takes in one interval's counters b, elapsed long, and returns the
// measured rate to report, or 0. A burst is reported once: with its
// second interval's rate, or with its first's when it ends (or its
// session does) after one interval.
func (s *burstState) step(b rateRateBucket, elapsed time.Duration, last bool) int64 {
	passed, over := b.Passed-s.passed, b.Over-s.over
	s.passed, s.over = b.Passed, b.Over
	var measured int64
	if elapsed > 0 {
		measured = int64(float64(passed+over) / elapsed.Seconds())
	}
	var report int64
	switch {
	case over > 0 && !s.inBurst:
		s.inBurst, s.emitted, s.first = true, false, measured
		if last {
			report, s.emitted = measured, true
		}
	case over > 0 && !s.emitted:
		report, s.emitted = measured, true
	case over == 0 && s.inBurst:
		if !s.emitted {
			report = s.first
		}
		s.inBurst = false
	}
	return report
}

func (r *rateCollector) toEvent(c *Collector, cgroupID uint64, s *rateState, measured int64) *event.Event {
	action := actionThrottle
	if s.warn {
		action = actionWarn
	}
	return &event.Event{
		V:         event.SchemaVersion,
		TS:        time.Now().UTC(),
		Host:      c.opts.host,
		SessionID: c.session(cgroupID),
		Kind:      event.KindLimitHit,
		Source:    event.SourceKernel,
		Limit:     &event.Limit{Type: limitNetRate, Measured: measured, Configured: s.rate, Unit: unitNetRate, Action: action},
	}
}

// SetNetRate limits the traffic of the sockets in cgroup cgroupID (and in
// cgroups nested beneath it) to bytesPerSec bytes per second each way,
// enforced in the kernel by a token bucket per direction: over the rate,
// packets are dropped (TCP backs off and retransmits), or with warn only
// counted. Bursts over the rate become limit.hit net_rate events of the
// cgroup's session (Watch it first). Unwatch ends the limit, reporting
// the last burst, 2 minutes later (the session's sockets may still be
// sending what its processes wrote before they exited). It returns
// ErrClosed after Close, and an error for id 0 or a rate outside 1 B/s to
// 16 GiB/s.
func (c *Collector) SetNetRate(cgroupID uint64, bytesPerSec int64, warn bool) error {
	if cgroupID == 0 {
		return fmt.Errorf("setting net rate: id 0 is not a cgroup")
	}
	if bytesPerSec <= 0 || bytesPerSec > maxNetRate {
		return fmt.Errorf("setting net rate of cgroup %d: %d B/s is outside 1 B/s to 16 GiB/s", cgroupID, bytesPerSec)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return c.rate.set(cgroupID, bytesPerSec, warn)
}
