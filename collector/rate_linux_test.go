//go:build 386 || amd64 || arm64

package collector

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// TestBurstStep: a burst over the rate is reported once, with the rate of
// its second interval, or of its first when it lasts one interval or its
// cgroup goes.
func TestBurstStep(t *testing.T) {
	type tick struct {
		passed, over uint64
		last         bool
		want         int64
	}
	tests := []struct {
		name  string
		ticks []tick
	}{
		{name: "under the rate", ticks: []tick{{passed: 100}, {passed: 200}, {passed: 300}}},
		{name: "long burst once", ticks: []tick{
			{passed: 100, over: 50}, {passed: 200, over: 150, want: 200}, {passed: 300, over: 300}, {passed: 400, over: 300},
		}},
		{name: "one-interval burst at its end", ticks: []tick{{passed: 100, over: 50}, {passed: 110, over: 50, want: 150}}},
		{name: "two bursts", ticks: []tick{
			{passed: 10, over: 10}, {passed: 20, over: 20, want: 20}, {passed: 30, over: 20},
			{passed: 40, over: 25}, {passed: 50, over: 30, want: 15},
		}},
		{name: "burst when the cgroup goes", ticks: []tick{{passed: 0, over: 70, last: true, want: 70}}},
		{name: "reported burst ending with the cgroup", ticks: []tick{{over: 5}, {over: 10, want: 5}, {over: 10, last: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s burstState
			for i, k := range tt.ticks {
				got := s.step(rateRateBucket{Passed: k.passed, Over: k.over}, time.Second, k.last)
				if got != k.want {
					t.Errorf("tick %d: step(passed %d, over %d) = %d, want %d", i, k.passed, k.over, got, k.want)
				}
			}
		})
	}
}

// TestNetRateNames: the net_rate events use the session monitor's names
// of the limit actions.
func TestNetRateNames(t *testing.T) {
	if actionThrottle != session.ActionThrottle || actionWarn != session.ActionWarn {
		t.Errorf("actions %q, %q, want the session's %q, %q", actionThrottle, actionWarn, session.ActionThrottle, session.ActionWarn)
	}
}

func TestNetBurst(t *testing.T) {
	for _, tt := range []struct{ rate, want int64 }{
		{1, minNetBurst}, {1 << 20, minNetBurst}, {16 << 20, 2 << 20}, {maxNetRate, maxNetRate / 8},
	} {
		if got := netBurst(tt.rate); got != uint64(tt.want) {
			t.Errorf("netBurst(%d) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

// TestNetRateNested: a client in a cgroup nested beneath a rate-limited
// watched cgroup, which sent packets before the rate was set, fetches 1 MiB
// at 256 KiB/s: it takes at least 2 s, and the burst is one limit.hit
// net_rate of the session, throttle, measured at least the rate.
func TestNetRateNested(t *testing.T) {
	const sid, rate, size = "sess-net-rate", 256 << 10, 1 << 20
	cg, r := startWatched(t, sid)
	inner := cg.Child(t, "inner")
	srv := testnet.StartServer(t, "tcp4", "127.0.0.1:0")
	fetch := func(n int) time.Duration {
		t.Helper()
		start := time.Now()
		out, err := helperCmd(t, inner, "net-get", srv.URL(n)).Output()
		if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(n) {
			t.Fatalf("client: %q, %v, want %d bytes", out, err, n)
		}
		return time.Since(start)
	}
	fetch(64 << 10) // before the rate: inner is remembered as unlimited
	for _, bad := range []struct {
		id   uint64
		rate int64
	}{{0, rate}, {cg.ID, 0}, {cg.ID, -1}, {cg.ID, maxNetRate + 1}} {
		if err := r.c.SetNetRate(bad.id, bad.rate, false); err == nil {
			t.Errorf("SetNetRate(%d, %d) = nil, want an error", bad.id, bad.rate)
		}
	}
	if err := r.c.SetNetRate(cg.ID, rate, false); err != nil {
		t.Fatalf("SetNetRate() = %v", err)
	}
	if d := fetch(size); d < 2*time.Second {
		t.Errorf("1 MiB at 256 KiB/s took %v, want at least 2 s", d)
	}
	hit := r.wait(t, "limit.hit", func(ev *event.Event) bool { return ev.Kind == event.KindLimitHit })
	if l := hit.Limit; hit.SessionID != sid || l.Type != limitNetRate || l.Configured != rate || l.Measured < rate || l.Unit != unitNetRate || l.Action != actionThrottle {
		t.Errorf("limit.hit = session %q %+v, want %s net_rate configured %d, measured at least that, B/s, throttle", hit.SessionID, *l, sid, rate)
	}
}
