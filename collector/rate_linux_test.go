//go:build 386 || amd64 || arm64

package collector

import (
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
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
