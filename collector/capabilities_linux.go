//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// capabilityProbe is how one capability of event.Capabilities is found on
// the running kernel: have reports whether it is there (with what was
// found), and without says what the collector does when it is not.
type capabilityProbe struct {
	name     string
	required bool
	since    string
	have     func(k *kernelFacts) (bool, string)
	without  string
}

// kernelFacts are the kernel's BTF, read once for every probe.
type kernelFacts struct {
	spec *btf.Spec
	err  error
}

// kfunc reports whether the kernel's BTF has the function name (a kfunc is
// a kernel function the BTF names).
func (k *kernelFacts) kfunc(name string) bool {
	if k.spec == nil {
		return false
	}
	var fn *btf.Func
	return k.spec.TypeByName(name, &fn) == nil
}

// enumValue reports whether the kernel's enum typ has the value name: an
// attach type the kernel knows is a value of enum bpf_attach_type.
func (k *kernelFacts) enumValue(typ, name string) bool {
	if k.spec == nil {
		return false
	}
	var e *btf.Enum
	if k.spec.TypeByName(typ, &e) != nil {
		return false
	}
	for _, v := range e.Values {
		if v.Name == name {
			return true
		}
	}
	return false
}

// field reports whether the kernel's struct typ has the member name.
func (k *kernelFacts) field(typ, name string) bool {
	if k.spec == nil {
		return false
	}
	var s *btf.Struct
	if k.spec.TypeByName(typ, &s) != nil {
		return false
	}
	for _, m := range s.Members {
		if m.Name == name {
			return true
		}
	}
	return false
}

// helper reports whether a tracepoint program may call fn.
func helper(fn asm.BuiltinFunc) (bool, string) {
	err := features.HaveProgramHelper(ebpf.TracePoint, fn)
	if err == nil {
		return true, ""
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return false, ""
	}
	return false, err.Error()
}

// overlayModule is the overlay filesystem's module, whose BTF describes its
// inode where Debian and others build it as a module.
const overlayModule = "overlay"

var capabilityProbes = []capabilityProbe{
	{name: event.CapBTF, required: true, since: "5.4",
		have: func(k *kernelFacts) (bool, string) {
			if k.err != nil {
				return false, fmt.Sprintf("%s: %v", btfPath, k.err)
			}
			return true, btfPath
		},
		without: "the kernel's BTF (CONFIG_DEBUG_INFO_BTF) is needed for CO-RE and tp_btf"},
	{name: event.CapRingbuf, required: true, since: "5.8",
		have: func(*kernelFacts) (bool, string) {
			err := features.HaveMapType(ebpf.RingBuf)
			if err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
				return false, err.Error()
			}
			return err == nil, ""
		},
		without: "BPF ring buffers carry every record"},
	{name: event.CapBPFLoop, required: true, since: "5.17",
		have:    func(*kernelFacts) (bool, string) { return helper(asm.FnLoop) },
		without: "every path walk and argv copy runs under bpf_loop"},
	{name: event.CapTaskPtRegs, required: true, since: "5.15",
		have:    func(*kernelFacts) (bool, string) { return helper(asm.FnTaskPtRegs) },
		without: "syscall arguments are read at the syscall's exit with bpf_task_pt_regs"},
	{name: event.CapCgroupSockAddr, required: true, since: "4.17",
		have: func(*kernelFacts) (bool, string) {
			err := features.HaveProgramType(ebpf.CGroupSockAddr)
			if err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
				return false, err.Error()
			}
			return err == nil, ""
		},
		without: "the cgroup connect and sendmsg hooks record and enforce egress and redirect DNS"},
	{name: event.CapBTFCast, since: "6.2",
		have: func(k *kernelFacts) (bool, string) {
			return k.kfunc("bpf_rdonly_cast") && k.kfunc("bpf_cast_to_kern_ctx"), ""
		},
		without: "kernel memory is read with bpf_probe_read_kernel instead of the kfunc casts: the same record, at a higher cost"},
	{name: event.CapUnixEnforce, since: "6.7",
		have: func(k *kernelFacts) (bool, string) {
			return k.enumValue("bpf_attach_type", "BPF_CGROUP_UNIX_CONNECT") &&
				k.enumValue("bpf_attach_type", "BPF_CGROUP_UNIX_SENDMSG") && k.kfunc("bpf_cast_to_kern_ctx"), ""
		},
		without: "unix-socket enforcement needs the cgroup unix hooks; recording connects and sends from syscalls instead, and egress.unix refuses nothing"},
	{name: event.CapClone3Kill, since: "6.13",
		have:    func(k *kernelFacts) (bool, string) { return k.kfunc("bpf_send_signal_task"), "" },
		without: "a clone3 child made in a new user namespace is recorded (process.denied clone3_alive), not killed; clone and unshare are still refused by seccomp"},
	{name: event.CapOverlayInode, since: "5.11",
		have: func(k *kernelFacts) (bool, string) {
			if k.field("ovl_inode", "oe") || k.field("ovl_inode", "lowerpath") {
				return true, "overlay is built in"
			}
			mod, err := btf.LoadKernelModuleSpec(overlayModule)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return false, "no BTF of the overlay module (not loaded, or CONFIG_DEBUG_INFO_BTF_MODULES is off)"
				}
				return false, err.Error()
			}
			var s *btf.Struct
			if mod.TypeByName("ovl_inode", &s) != nil {
				return false, "the overlay module's BTF has no struct ovl_inode"
			}
			return true, "from the overlay module's BTF"
		},
		without: "the real file behind an exec from a session's private /tmp is named from /proc/PID/exe, which an exited process no longer has"},
	{name: event.CapGetpeername, since: "5.8",
		have: func(k *kernelFacts) (bool, string) {
			return k.enumValue("bpf_attach_type", "BPF_CGROUP_INET4_GETPEERNAME"), ""
		},
		without: "getpeername on a redirected DNS socket names sandtrail's proxy instead of the resolver asked for"},
}

// Probe reports what the kernel collector can do on this kernel, without
// loading it: each capability of event.Capabilities, with what was found
// or, when it is missing, the oldest Linux that has it and what the
// collector does instead. It needs the privileges that loading BPF needs;
// it returns ErrPermission without them.
func Probe() (*event.Kernel, error) {
	if err := privileged(); err != nil {
		return nil, err
	}
	// The overlay module's BTF exists only while it is loaded; a session's
	// first private /tmp would load it, after the collector started.
	loadOverlay()
	return probeKernel(), nil
}

// probeKernel runs every capability probe.
func probeKernel() *event.Kernel {
	k := &kernelFacts{}
	if _, err := os.Stat(btfPath); err != nil {
		k.err = err
	} else {
		k.spec, k.err = btf.LoadKernelSpec()
	}
	out := &event.Kernel{Release: kernelRelease()}
	for _, p := range capabilityProbes {
		have, detail := p.have(k)
		c := event.Capability{Name: p.name, Have: have, Required: p.required, Since: p.since, Detail: detail}
		if !have {
			c.Detail = p.without
			if detail != "" {
				c.Detail += " (" + detail + ")"
			}
		}
		out.Capabilities = append(out.Capabilities, c)
	}
	return out
}

// requiredMissing returns the error New fails with when the kernel lacks a
// capability the collector cannot start without: one line that names each
// such capability and the oldest Linux that has it.
func requiredMissing(k *event.Kernel) error {
	var missing []string
	newest := ""
	for _, c := range k.Capabilities {
		if c.Required && !c.Have {
			missing = append(missing, fmt.Sprintf("%s (Linux %s)", c.Name, c.Since))
			if newerRelease(c.Since, newest) {
				newest = c.Since
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the kernel collector needs Linux %s or newer; this kernel (%s) lacks %s",
		ErrNotSupported, newest, k.Release, strings.Join(missing, ", "))
}

// newerRelease reports whether release a ("5.17") is newer than b ("" is
// older than any).
func newerRelease(a, b string) bool {
	var a1, a2, b1, b2 int
	if _, err := fmt.Sscanf(a, "%d.%d", &a1, &a2); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &b1, &b2); err != nil {
		return true
	}
	return a1 > b1 || (a1 == b1 && a2 > b2)
}

// has reports whether k has the capability name.
func has(k *event.Kernel, name string) bool {
	for _, c := range k.Capabilities {
		if c.Name == name {
			return c.Have
		}
	}
	return false
}

// set records whether the running collector uses the capability name, and
// what it does instead when it does not: a probe may find a capability that
// the load then could not use.
func set(k *event.Kernel, name string, have bool, detail string) {
	for i := range k.Capabilities {
		c := &k.Capabilities[i]
		if c.Name == name {
			c.Have = have
			if detail != "" {
				c.Detail = detail
			}
			return
		}
	}
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// loadOverlay asks the kernel to load the overlay filesystem's module (an
// overlay mount of nothing, which fails, loads it as any mount of the type
// would), so that its BTF is there when the collector loads. It is best
// effort: without the module the collector names an overlay's real file
// from userspace.
func loadOverlay() {
	if _, err := os.Stat("/sys/kernel/btf/" + overlayModule); err == nil {
		return
	}
	dir, err := os.MkdirTemp("", "sandtrail-overlay-probe-")
	if err != nil {
		return
	}
	defer os.Remove(dir)
	if unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, "lowerdir=/nonexistent-sandtrail-probe") == nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
}

// Kernel returns what the running collector uses of the kernel: each
// capability of event.Capabilities, with what it does instead of each
// missing one. The caller must not change it.
func (c *Collector) Kernel() *event.Kernel { return c.kernel }

// capabilitiesEvent is the collector.capabilities event, the first the
// collector sends: it says, in the record, what the collector could not see
// or enforce on this kernel.
func (c *Collector) capabilitiesEvent() *event.Event {
	return &event.Event{V: event.SchemaVersion, TS: time.Now().UTC(), Host: c.opts.host,
		Kind: event.KindCapabilities, Source: event.SourceKernel, Kernel: c.kernel}
}
