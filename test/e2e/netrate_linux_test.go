package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/test/testnet"
)

// tcpSendHelper connects to ADDR, writes N bytes, shuts its side down and
// waits for the peer to close, so that the transfer ends in the session
// (not from a socket buffer after it).
func tcpSendHelper(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tcpsend ADDR N")
		return 2
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := net.DialTimeout("tcp", args[0], 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, n)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

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
				t.Logf("limit.hit %+v", *l)
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

// TestRunNetRateEgress: the rate holds the other way too. A session run
// with --net-rate 1MB sends 10 MiB to a loopback sink: the sink receives
// them over at least 8 s, and the burst is one throttle event.
func TestRunNetRateEgress(t *testing.T) {
	t.Parallel()
	const size, rate = 10 << 20, 1 << 20
	e := newEnv(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	type sunk struct {
		n   int64
		dur time.Duration
		err error
	}
	got := make(chan sunk, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- sunk{err: err}
			return
		}
		defer c.Close()
		var first [1]byte
		if _, err := io.ReadFull(c, first[:]); err != nil {
			got <- sunk{err: err}
			return
		}
		start := time.Now()
		n, err := io.Copy(io.Discard, c)
		got <- sunk{n: n + 1, dur: time.Since(start), err: err}
	}()
	r := e.run(append([]string{"--user", "nobody", "--net-rate", "1MB", "--timeout", "120s", "--"},
		helperCmd("tcpsend", ln.Addr().String(), strconv.Itoa(size))...)...)
	if r.code != 0 || r.summary.Reason != "normal" {
		t.Fatalf("sandtrail run: exit %d, reason %q, want 0 and normal\n%s", r.code, r.summary.Reason, r.stderr)
	}
	s := <-got
	if s.err != nil || s.n != size {
		t.Fatalf("sink received %d bytes (%v), want %d", s.n, s.err, size)
	}
	t.Logf("%d bytes in %v (%.0f B/s)", s.n, s.dur, float64(s.n)/s.dur.Seconds())
	if s.dur < 8*time.Second {
		t.Errorf("throttled upload took %v, want at least 8 s", s.dur)
	}
	hits := limitHits(e.events(r.summary.SessionID), "net_rate")
	if len(hits) == 0 || len(hits) > 2 {
		t.Fatalf("%d net_rate limit hits, want one per burst", len(hits))
	}
	for _, h := range hits {
		t.Logf("limit.hit %+v", *h.Limit)
		if l := h.Limit; l.Configured != rate || l.Measured < l.Configured || l.Action != "throttle" {
			t.Errorf("net_rate = %+v, want configured %d, measured at least that, action throttle", l, rate)
		}
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
