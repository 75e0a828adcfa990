package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// kernel618 is a kernel with every capability.
func kernel618() *event.Kernel {
	k := &event.Kernel{Release: "6.18.0"}
	for i, n := range event.Capabilities {
		k.Capabilities = append(k.Capabilities, event.Capability{Name: n, Have: true, Required: i < 5})
	}
	return k
}

// kernel515 is Ubuntu 22.04's: without bpf_loop, which the collector
// requires, and the newer optional ones.
func kernel515() *event.Kernel {
	k := kernel618()
	k.Release = "5.15.0-91-generic"
	for i := range k.Capabilities {
		c := &k.Capabilities[i]
		switch c.Name {
		case event.CapBPFLoop:
			c.Have, c.Since, c.Detail = false, "5.17", "every path walk and argv copy runs under bpf_loop"
		case event.CapBTFCast, event.CapUnixEnforce, event.CapClone3Kill:
			c.Have = false
		}
	}
	return k
}

func TestDiagnosisVerdict(t *testing.T) {
	tests := []struct {
		name    string
		k       *event.Kernel
		probe   string
		require []string
		ok      bool
		unmet   []string
		lines   []string // each must be in the table
	}{
		{name: "every capability", k: kernel618(), ok: true, unmet: []string{},
			lines: []string{
				"kernel     6.18.0: every capability\n",
				"policy     the embedded default policy requires nothing more\n",
				"verdict    every capability present: sandtrail runs with no fallbacks\n",
			}},
		{name: "fallbacks only", k: kernel61(), ok: true, unmet: []string{},
			lines: []string{
				"kernel     6.1.0-50-cloud-amd64: without unix_enforce, clone3_kill\n",
				"  unix_enforce      no              Linux 6.7   unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead\n",
				"verdict    all required capabilities present: sandtrail runs with 2 fallbacks (unix_enforce, clone3_kill)\n",
			}},
		{name: "the policy requires a missing one", k: kernel61(), require: []string{event.CapUnixEnforce}, unmet: []string{event.CapUnixEnforce},
			lines: []string{
				"  unix_enforce      no    policy    Linux 6.7   unix-socket enforcement",
				"policy     /etc/sandtrail/policy.yaml requires unix_enforce\n",
				"           missing unix_enforce: unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead (Linux 6.7+; this kernel is 6.1.0-50-cloud-amd64)\n",
				"verdict    needs Linux 6.7 (unix_enforce), or a policy that does not require unix_enforce\n",
			}},
		{name: "a required one missing", k: kernel515(), unmet: []string{event.CapBPFLoop},
			lines: []string{
				"  bpf_loop          no    yes       Linux 5.17  every path walk",
				"verdict    needs Linux 5.17 (bpf_loop)\n",
			}},
		{name: "not probed", probe: "collector: insufficient privileges", unmet: []string{},
			lines: []string{
				"kernel     not probed: collector: insufficient privileges\n",
				"verdict    cannot tell: collector: insufficient privileges\n",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Diagnosis{Require: tt.require, Unmet: []string{}, ProbeError: tt.probe,
				Cgroups: CgroupLayout{Layout: "v2", V2: "/sys/fs/cgroup"}, SockDiag: sockDiag(func(uint8, uint8) (bool, error) { return true, nil })}
			if tt.require != nil {
				d.Policy = "/etc/sandtrail/policy.yaml"
			}
			if tt.k != nil {
				d.setKernel(tt.k)
			}
			if d.OK() != tt.ok {
				t.Errorf("OK() = %v, want %v", d.OK(), tt.ok)
			}
			if !slices.Equal(d.Unmet, tt.unmet) {
				t.Errorf("Unmet = %q, want %q", d.Unmet, tt.unmet)
			}
			var b strings.Builder
			if err := d.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.lines {
				if !strings.Contains(b.String(), l) {
					t.Errorf("table lacks %q:\n%s", l, b.String())
				}
			}
		})
	}
}

func TestCgroupLayout(t *testing.T) {
	const (
		v2     = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
		hybrid = "30 23 0:26 / /sys/fs/cgroup/unified rw shared:4 - cgroup2 cgroup2 rw\n" +
			"31 23 0:27 / /sys/fs/cgroup/memory rw shared:5 - cgroup cgroup rw,memory\n" +
			"32 23 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:6 - cgroup cgroup rw,cpu,cpuacct\n" +
			"33 23 0:29 / /sys/fs/cgroup/systemd rw shared:7 - cgroup cgroup rw,xattr,name=systemd\n"
		v1only = "31 23 0:27 / /sys/fs/cgroup/memory rw shared:5 - cgroup cgroup rw,memory\n"
	)
	tests := []struct {
		name, mountinfo string
		ownErr          error
		want            string
	}{
		{"pure v2", v2, nil, "pure v2 at /sys/fs/cgroup; sessions beneath /sys/fs/cgroup/system.slice/sandtrail.service"},
		{"hybrid", hybrid, nil, "hybrid: v2 at /sys/fs/cgroup/unified, v1 controllers cpu, cpuacct, memory; sessions beneath /sys/fs/cgroup/system.slice/sandtrail.service"},
		{"v1 only", v1only, errors.New("no v2"), "v1 only (controllers memory): sessions need a cgroup2 hierarchy (this process's v2 cgroup: no v2)"},
		{"garbage", "not mountinfo\n", nil, "unknown ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := cgroupLayout([]byte(tt.mountinfo), "/sys/fs/cgroup/system.slice/sandtrail.service", tt.ownErr)
			if got := l.describe(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("cgroupLayout(%s).describe() = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestMountPoints(t *testing.T) {
	mi := "22 1 0:21 / /proc rw - proc proc rw\n" +
		"40 22 0:12 / /sys/kernel/tracing rw,nosuid - tracefs tracefs rw\n" +
		"41 22 0:12 / /mnt/my\\040trace rw - tracefs tracefs rw\n" +
		"bad line\n"
	if got, want := mountPoints([]byte(mi), "tracefs"), []string{"/sys/kernel/tracing", "/mnt/my trace"}; !slices.Equal(got, want) {
		t.Errorf("mountPoints(tracefs) = %q, want %q", got, want)
	}
	if got := mountPoints([]byte(mi), "debugfs"); len(got) != 0 {
		t.Errorf("mountPoints(debugfs) = %q, want none", got)
	}
}

// TestSockDiag: each module from what sock_diag answers; inet_diag is
// there when tcp_diag or udp_diag is.
func TestSockDiag(t *testing.T) {
	answers := map[uint8]bool{diagTCP: false, diagUDP: true}
	ms := sockDiag(func(family, protocol uint8) (bool, error) {
		if family == diagUnix {
			return false, errors.New("sock_diag: EPERM")
		}
		return answers[protocol], nil
	})
	var got []string
	for _, m := range ms {
		got = append(got, m.describe())
	}
	want := []string{
		"inet_diag present: sock_diag of inet sockets, beneath tcp_diag and udp_diag",
		"tcp_diag missing (modprobe tcp_diag): the mirror finds the session of a TCP client",
		"udp_diag present: the DNS proxy checks which session sent a query",
		"unix_diag unknown (sock_diag: EPERM): sock_diag of unix sockets, for ss -x on a session's sockets",
	}
	if !slices.Equal(got, want) {
		t.Errorf("sockDiag =\n%q\nwant\n%q", got, want)
	}
	ms = sockDiag(func(uint8, uint8) (bool, error) { return false, nil })
	if ms[0].Present {
		t.Errorf("inet_diag present without tcp_diag and udp_diag")
	}
}

// TestSockDiagAnswers asks the running kernel about TCP, whose sock_diag
// every kernel that sandtrail runs on has (the mirror needs it).
func TestSockDiagAnswers(t *testing.T) {
	ok, err := sockDiagAnswers(diagInet, diagTCP)
	if err != nil {
		t.Skipf("skipping: this system has no sock_diag: %v", err)
	}
	if !ok {
		t.Skip("skipping: this kernel has no tcp_diag")
	}
}
