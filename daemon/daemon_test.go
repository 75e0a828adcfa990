package daemon

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
)

// kernel61 is Debian 12's cloud kernel as the collector describes it:
// every required capability, without unix_enforce and clone3_kill.
func kernel61() *event.Kernel {
	k := &event.Kernel{Release: "6.1.0-50-cloud-amd64"}
	for i, n := range event.Capabilities {
		k.Capabilities = append(k.Capabilities, event.Capability{Name: n, Have: true, Required: i < 5})
	}
	for i := range k.Capabilities {
		c := &k.Capabilities[i]
		switch c.Name {
		case event.CapUnixEnforce:
			c.Have, c.Since, c.Detail = false, "6.7", "unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead"
		case event.CapClone3Kill:
			c.Have, c.Since, c.Detail = false, "6.13", "a clone3 child in a new user namespace is recorded, not killed"
		}
	}
	return k
}

func TestUnmetRequirements(t *testing.T) {
	tests := []struct {
		name    string
		require []string
		want    string // "" for nil
	}{
		{"nothing required", nil, ""},
		{"present", []string{event.CapBTFCast, event.CapGetpeername}, ""},
		{"one missing", []string{event.CapBTFCast, event.CapUnixEnforce},
			"policy requires unix_enforce: unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead (Linux 6.7+; this kernel is 6.1.0-50-cloud-amd64)"},
		{"two missing", []string{event.CapClone3Kill, event.CapUnixEnforce},
			"policy requires clone3_kill: a clone3 child in a new user namespace is recorded, not killed (Linux 6.13+; this kernel is 6.1.0-50-cloud-amd64); and unix_enforce: unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead (Linux 6.7+; this kernel is 6.1.0-50-cloud-amd64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unmetRequirements(kernel61(), tt.require)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("unmetRequirements(%v) = %q, want %q", tt.require, got, tt.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("unmetRequirements(%v) is more than one line", tt.require)
			}
		})
	}
}

// TestLogWithout: one info line per capability the collector does
// without, with its detail; nothing for those it has.
func TestLogWithout(t *testing.T) {
	var buf bytes.Buffer
	logWithout(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}), kernel61())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logWithout logged %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"capability=unix_enforce", "capability=clone3_kill"} {
		if !strings.Contains(lines[i], "[INFO]") || !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "detail=") {
			t.Errorf("line %d = %q, want an info line with %s and its detail", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "recording connects from syscalls instead") {
		t.Errorf("line 0 = %q, want unix_enforce's detail", lines[0])
	}
}

// TestUpstreamNames: the addresses the mirror connected to are named by
// the host they were connected for, a v4-mapped address as its v4 one, up
// to maxUpstreamNames addresses; a known one is renamed past the bound.
func TestUpstreamNames(t *testing.T) {
	var u upstreamNames
	a := netip.MustParseAddr("192.0.2.1")
	u.add(a, "registry.npmjs.org")
	if got := u.name(netip.MustParseAddr("::ffff:192.0.2.1")); got != "registry.npmjs.org" {
		t.Errorf("name(v4-mapped) = %q, want registry.npmjs.org", got)
	}
	if got := u.name(netip.MustParseAddr("192.0.2.2")); got != "" {
		t.Errorf("name(unknown) = %q, want none", got)
	}
	for i := 0; len(u.m) < maxUpstreamNames; i++ {
		u.add(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), "h")
	}
	u.add(netip.MustParseAddr("198.51.100.1"), "late")
	if got := u.name(netip.MustParseAddr("198.51.100.1")); got != "" || len(u.m) != maxUpstreamNames {
		t.Errorf("past the bound: name = %q, %d names; want none, %d", got, len(u.m), maxUpstreamNames)
	}
	u.add(a, "registry.yarnpkg.com")
	if got := u.name(a); got != "registry.yarnpkg.com" {
		t.Errorf("a known address past the bound = %q, want renamed", got)
	}
}
