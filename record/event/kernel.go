package event

// The capabilities of the kernel collector, named once for every producer
// and reader: the collector that probes them, the policy's require list, the
// collector.capabilities event, `sandtrail doctor` and docs/kernels.md.
// A required capability is one the collector cannot start without; each
// other one has a fallback that the collector uses instead, or a part of the
// record that it cannot give, which Capability.Detail names.
const (
	// CapBTF: the kernel's own BTF (/sys/kernel/btf/vmlinux), for CO-RE
	// and tp_btf. Required.
	CapBTF = "btf"
	// CapRingbuf: BPF ring buffers (Linux 5.8). Required.
	CapRingbuf = "ringbuf"
	// CapBPFLoop: the bpf_loop helper (Linux 5.17), which every path walk
	// and argv copy runs under. Required.
	CapBPFLoop = "bpf_loop"
	// CapTaskPtRegs: the bpf_task_pt_regs helper (Linux 5.15), which reads
	// a syscall's arguments at its exit. Required.
	CapTaskPtRegs = "task_pt_regs"
	// CapCgroupSockAddr: cgroup connect and sendmsg hooks, which record
	// and enforce egress and redirect DNS. Required.
	CapCgroupSockAddr = "cgroup_sock_addr"
	// CapBTFCast: the bpf_rdonly_cast and bpf_cast_to_kern_ctx kfuncs
	// (Linux 6.2). Without them the collector reads kernel memory with
	// bpf_probe_read_kernel instead: the same record, at a higher cost.
	CapBTFCast = "btf_cast"
	// CapUnixEnforce: the cgroup unix-socket hooks (Linux 6.7), which
	// enforce egress.unix. Without them unix connects and sends are
	// recorded from syscall tracepoints and not refused.
	CapUnixEnforce = "unix_enforce"
	// CapClone3Kill: the bpf_send_signal_task kfunc (Linux 6.13), with
	// which the collector kills a clone3 child made in a new user
	// namespace before it runs. Without it the child is recorded, not
	// killed.
	CapClone3Kill = "clone3_kill"
	// CapOverlayInode: the overlay filesystem's inode layout in the
	// kernel's BTF, with which the collector names the real file behind
	// an exec from a session's private /tmp. Without it the collector
	// reads it from /proc/PID/exe, which a process that has already exited
	// no longer has.
	CapOverlayInode = "overlay_inode"
	// CapGetpeername: the cgroup getpeername hooks (Linux 5.8), which make
	// a redirected DNS socket name the resolver it asked for rather than
	// sandtrail's proxy.
	CapGetpeername = "getpeername"
)

// Capabilities lists every capability above, the required ones first.
var Capabilities = []string{
	CapBTF, CapRingbuf, CapBPFLoop, CapTaskPtRegs, CapCgroupSockAddr,
	CapBTFCast, CapUnixEnforce, CapClone3Kill, CapOverlayInode, CapGetpeername,
}

// Kernel describes what the kernel collector can see and enforce on the
// kernel it runs on: the payload of collector.capabilities, written once
// when the collector starts, so that a record says what it could not see.
type Kernel struct {
	// Release is the kernel's release (uname -r).
	Release string `json:"release"`
	// Capabilities has one entry per name of Capabilities, in that order.
	Capabilities []Capability `json:"capabilities"`
}

// Capability is one capability of the kernel collector on this kernel.
type Capability struct {
	// Name is one of Capabilities.
	Name string `json:"name"`
	// Have is set when the collector uses it.
	Have bool `json:"have"`
	// Required is set when the collector cannot start without it.
	Required bool `json:"required,omitempty"`
	// Since is the oldest Linux release that has it, such as "6.7".
	Since string `json:"since,omitempty"`
	// Detail says what was found, or, without it, why not and what the
	// collector does instead: "unix-socket enforcement needs Linux 6.7;
	// recording connects from syscalls instead".
	Detail string `json:"detail,omitempty"`
}

// Missing returns the names among names that k does not have, in the order
// of names. A name k does not list is missing.
func (k *Kernel) Missing(names []string) []string {
	var out []string
	for _, n := range names {
		have := false
		for _, c := range k.Capabilities {
			if c.Name == n {
				have = c.Have
				break
			}
		}
		if !have {
			out = append(out, n)
		}
	}
	return out
}
