package render

import (
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// testKernel returns a kernel with every capability of event.Capabilities,
// the first five required, and edit applied to each.
func testKernel(release string, edit func(c *event.Capability)) *event.Kernel {
	since := map[string]string{
		event.CapRingbuf: "5.8", event.CapBPFLoop: "5.17", event.CapTaskPtRegs: "5.15",
		event.CapBTFCast: "6.2", event.CapUnixEnforce: "6.7", event.CapClone3Kill: "6.13", event.CapGetpeername: "5.8",
	}
	k := &event.Kernel{Release: release}
	for i, n := range event.Capabilities {
		c := event.Capability{Name: n, Have: true, Required: i < 5, Since: since[n]}
		if edit != nil {
			edit(&c)
		}
		k.Capabilities = append(k.Capabilities, c)
	}
	return k
}

// lacking returns an edit that takes the named capabilities away, with a
// detail.
func lacking(names ...string) func(c *event.Capability) {
	return func(c *event.Capability) {
		if slices.Contains(names, c.Name) {
			c.Have, c.Detail = false, c.Name+" is missing here"
		}
	}
}

func TestKernelWithout(t *testing.T) {
	tests := []struct {
		name string
		k    *event.Kernel
		want string
	}{
		{"nil", nil, ""},
		{"every capability", testKernel("6.18.0", nil), ""},
		{"two fallbacks", testKernel("6.1.0-50-cloud-amd64", lacking(event.CapUnixEnforce, event.CapClone3Kill)),
			"6.1.0-50-cloud-amd64: without unix_enforce, clone3_kill"},
		{"escaped release", testKernel("6.1\x1b[31m", lacking(event.CapBTFCast)), `6.1\x1b[31m: without btf_cast`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KernelWithout(tt.k); got != tt.want {
				t.Errorf("KernelWithout() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRequirement(t *testing.T) {
	k := testKernel("6.1.0-50-cloud-amd64", func(c *event.Capability) {
		switch c.Name {
		case event.CapUnixEnforce:
			c.Have, c.Detail = false, "unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead"
		case event.CapOverlayInode:
			c.Have = false
		}
	})
	tests := []struct{ name, cap, want string }{
		{"with detail and since", event.CapUnixEnforce,
			"unix_enforce: unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead (Linux 6.7+; this kernel is 6.1.0-50-cloud-amd64)"},
		{"no detail, no since", event.CapOverlayInode, "overlay_inode: not available (this kernel is 6.1.0-50-cloud-amd64)"},
		{"not listed", "future_cap", "future_cap: not probed (this kernel is 6.1.0-50-cloud-amd64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Requirement(k, tt.cap); got != tt.want {
				t.Errorf("Requirement(%s) = %q, want %q", tt.cap, got, tt.want)
			}
		})
	}
}

func TestUnmetAndNearest(t *testing.T) {
	noBTF := func(c *event.Capability) {
		if c.Name == event.CapBTF {
			c.Have, c.Detail = false, "no /sys/kernel/btf/vmlinux"
		}
	}
	tests := []struct {
		name      string
		k         *event.Kernel
		require   []string
		wantUnmet []string
		want      string
	}{
		{"every capability", testKernel("6.18.0", nil), nil, nil,
			"every capability present: sandtrail runs with no fallbacks"},
		{"one fallback", testKernel("6.12.0", lacking(event.CapClone3Kill)), nil, nil,
			"all required capabilities present: sandtrail runs with 1 fallback (clone3_kill)"},
		{"fallbacks, policy satisfied", testKernel("6.1.0", lacking(event.CapBTFCast, event.CapUnixEnforce)), []string{event.CapGetpeername}, nil,
			"all required capabilities present: sandtrail runs with 2 fallbacks (btf_cast, unix_enforce)"},
		{"missing required", testKernel("5.15.0", lacking(event.CapBPFLoop, event.CapBTFCast)), nil, []string{event.CapBPFLoop},
			"needs Linux 5.17 (bpf_loop)"},
		{"required and policy, newest wins", testKernel("5.15.0", lacking(event.CapBPFLoop, event.CapUnixEnforce, event.CapClone3Kill)),
			[]string{event.CapUnixEnforce, event.CapBPFLoop}, []string{event.CapBPFLoop, event.CapUnixEnforce},
			"needs Linux 6.7 (bpf_loop, unix_enforce)"},
		{"only the policy", testKernel("6.1.0", lacking(event.CapUnixEnforce, event.CapClone3Kill)),
			[]string{event.CapUnixEnforce, event.CapClone3Kill}, []string{event.CapUnixEnforce, event.CapClone3Kill},
			"needs Linux 6.13 (unix_enforce, clone3_kill), or a policy that does not require unix_enforce, clone3_kill"},
		{"no release gives it", testKernel("6.1.0", noBTF), nil, []string{event.CapBTF},
			"needs btf (no /sys/kernel/btf/vmlinux)"},
		{"release and no release", testKernel("5.10.0", func(c *event.Capability) {
			noBTF(c)
			lacking(event.CapBPFLoop, event.CapTaskPtRegs)(c)
		}), nil, []string{event.CapBTF, event.CapBPFLoop, event.CapTaskPtRegs},
			"needs Linux 5.17 (bpf_loop, task_pt_regs); and btf (no /sys/kernel/btf/vmlinux)"},
		{"policy names a capability not probed", testKernel("6.18.0", nil), []string{"future_cap"}, []string{"future_cap"},
			"needs future_cap (not probed), or a policy that does not require future_cap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unmet(tt.k, tt.require); !slices.Equal(got, tt.wantUnmet) {
				t.Errorf("Unmet(%v) = %q, want %q", tt.require, got, tt.wantUnmet)
			}
			if got := Nearest(tt.k, tt.require); got != tt.want {
				t.Errorf("Nearest(%v) = %q, want %q", tt.require, got, tt.want)
			}
		})
	}
}

func TestSummaryKernel(t *testing.T) {
	for _, tt := range []struct {
		name string
		k    *event.Kernel
		want string
	}{
		{"fallbacks", testKernel("6.1.0-50-cloud-amd64", lacking(event.CapUnixEnforce)), "6.1.0-50-cloud-amd64: without unix_enforce"},
		{"every capability", testKernel("6.18.0", nil), "6.18.0: every capability"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := &event.Event{Kind: event.KindCapabilities, Source: event.SourceKernel, Kernel: tt.k}
			if got := Summary(ev); got != tt.want {
				t.Errorf("Summary(collector.capabilities) = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOlderRelease(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"5.17", "6.7", true},
		{"6.7", "6.13", true},
		{"6.13", "6.7", false},
		{"6.2", "6.2", false},
		{"6", "6.1", true},
	} {
		if got := olderRelease(tt.a, tt.b); got != tt.want {
			t.Errorf("olderRelease(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
