package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/test/testnet"
)

func init() { helpers["timedget"] = timedGetHelper }

// timedGetHelper fetches URL and prints "BYTES MILLISECONDS": the body's
// size and how long the transfer took.
func timedGetHelper(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: timedget URL")
		return 2
	}
	start := time.Now()
	n, err := testnet.Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(n, time.Since(start).Milliseconds())
	return 0
}

// TestRunNetRate: a session run with --net-rate 1MB fetches 10 MiB from a
// loopback server. Throttled, the transfer takes at least 8 s, the session
// ends normally, and one limit.hit net_rate per burst says throttle with a
// measured rate at least the configured one. With the policy's
// limits.net_rate_action: warn, the same transfer runs at full speed and
// the event says warn.
func TestRunNetRate(t *testing.T) {
	const size, rate = 10 << 20, 1 << 20
	tests := []struct {
		name, policy, action string
		slow                 bool
	}{
		{name: "throttle", action: "throttle", slow: true},
		{name: "warn", policy: "limits:\n  net_rate_action: warn\n", action: "warn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			srv := testnet.StartServer(t, "tcp4", "127.0.0.1:0")
			args := []string{"--user", "nobody", "--net-rate", "1MB", "--timeout", "120s"}
			if tt.policy != "" {
				args = append(args, "--policy", writePolicy(t, tt.policy))
			}
			r := e.run(append(append(args, "--"), helperCmd("timedget", srv.URL(size))...)...)
			if r.code != 0 || r.summary.Reason != "normal" {
				t.Fatalf("sandtrail run: exit %d, reason %q, want 0 and normal (not killed)\n%s", r.code, r.summary.Reason, r.stderr)
			}
			got, ms := parseTimedGet(t, r.stdout)
			if got != size {
				t.Fatalf("transfer = %d bytes, want %d", got, size)
			}
			t.Logf("%s: %d bytes in %d ms (%.0f B/s)", tt.name, got, ms, float64(got)/(float64(ms)/1000))
			if tt.slow && ms < 8000 {
				t.Errorf("throttled transfer took %d ms, want at least 8 s", ms)
			}
			if !tt.slow && ms >= 5000 {
				t.Errorf("transfer under warn took %d ms, want full speed (well under the 10 s of the rate)", ms)
			}
			evs := e.events(r.summary.SessionID)
			hits := limitHits(evs, "net_rate")
			if len(hits) == 0 {
				t.Fatalf("no net_rate limit.hit in %d events; summary %+v", len(evs), r.summary)
			}
			// Once per burst: one transfer is one burst in the direction
			// it flows in (the acknowledgements may make one the other way).
			if len(hits) > 2 {
				t.Errorf("%d net_rate limit hits for one transfer, want one per burst", len(hits))
			}
			for _, h := range hits {
				l := h.Limit
				if l.Configured != rate || l.Measured < l.Configured || l.Unit != "B/s" || l.Action != tt.action {
					t.Errorf("net_rate = %+v, want configured %d, measured at least that, unit B/s, action %s", l, rate, tt.action)
				}
			}
			if !strings.Contains(strings.Join(r.summary.Limits, "\n"), "net_rate") {
				t.Errorf("summary limit hits = %q, want the net_rate hit", r.summary.Limits)
			}
			e.verify()
		})
	}
}

// parseTimedGet reads timedget's "BYTES MILLISECONDS".
func parseTimedGet(t *testing.T, out string) (n, ms int64) {
	t.Helper()
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("timedget printed %q, want BYTES MILLISECONDS", out)
	}
	n, err1 := strconv.ParseInt(f[0], 10, 64)
	ms, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("timedget printed %q, want BYTES MILLISECONDS", out)
	}
	return n, ms
}
