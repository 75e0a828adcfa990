//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/record/event"
)

// denySyscalls are the syscalls whose refusals deny.c records, by the
// index that is its attach cookie: every syscall of the session filter's
// groups.
var denySyscalls = func() []string {
	var out []string
	for _, g := range seccomp.Groups() {
		out = append(out, seccomp.Syscalls(g)...)
	}
	return out
}()

// denyCollector is the part of deny.c: process.denied.
type denyCollector struct {
	objs   denyObjects
	loaded bool
}

func (d *denyCollector) load(c *Collector, shared *ebpf.CollectionOptions) error {
	if len(denySyscalls) >= int(denyDenyCookieDENY_SYSCALL_CLONE3ALIVE) {
		return fmt.Errorf("%d denied syscalls do not fit in the attach cookie", len(denySyscalls))
	}
	spec, err := loadDeny()
	if err != nil {
		return fmt.Errorf("loading deny bpf spec: %w", err)
	}
	// Replaced by process.c's ring buffer, whose size must match.
	spec.Maps[denyMapEvents].MaxEntries = uint32(c.opts.ringSize)
	if err := spec.LoadAndAssign(&d.objs, shared); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading deny bpf objects: %w", err)
	}
	d.loaded = true
	return nil
}

// attach attaches deny_exit to the sys_exit tracepoint of every listed
// syscall that exists, with its index (and for clone and unshare
// DENY_NEWUSER_ONLY) as the cookie.
func (d *denyCollector) attach(c *Collector) error {
	if !d.loaded {
		return nil
	}
	for i, name := range denySyscalls {
		cookie := uint64(i)
		if name == "clone" || name == "unshare" {
			cookie |= uint64(denyDenyCookieDENY_NEWUSER_ONLY)
		}
		tp := "sys_exit_" + name
		l, err := link.Tracepoint("syscalls", tp, d.objs.DenyExit, &link.TracepointOptions{Cookie: cookie})
		if errors.Is(err, os.ErrNotExist) {
			c.log.Debug("syscall tracepoint missing, refusals not recorded", "syscall", name)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: attaching tracepoint syscalls/%s: %v", ErrNotSupported, tp, err)
		}
		c.links = append(c.links, l)
	}
	return nil
}

func (d *denyCollector) programs() []progKind {
	if !d.loaded {
		return nil
	}
	return []progKind{{d.objs.DenyExit, processEventKindKIND_DENIED}}
}

// counters is empty: a lost process.denied is lost in the ring buffer or
// by a skipped run, which the shared counters report.
func (d *denyCollector) counters() []*lossCounter { return nil }

func (d *denyCollector) close() {
	if d.loaded {
		d.objs.Close()
		d.loaded = false
	}
}

// denied1 converts a refusal record (struct deny_event) to a process.denied
// event.
func (d *decoder) denied1(raw []byte) (*event.Event, *oomVictim, error) {
	var r denyDenyEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	name, errno, signal := "", "EPERM", int32(0)
	switch {
	case r.Syscall == uint32(denyDenyCookieDENY_SYSCALL_CLONE3):
		// A child made in a new user namespace, killed before it ran
		// (DenyUserNamespaces): the clone3 itself returned its pid.
		name, errno, signal = "clone3", "", int32(unix.SIGKILL)
	case r.Syscall == uint32(denyDenyCookieDENY_SYSCALL_CLONE3ALIVE):
		// The same, but the kernel could not kill it: no signal.
		name, errno = "clone3", ""
	case r.Syscall < uint32(len(denySyscalls)):
		name = denySyscalls[r.Syscall]
	default:
		return nil, nil, fmt.Errorf("%w: denied syscall index %d", errDecode, r.Syscall)
	}
	hdr := processEventHeader(r.Hdr)
	e := d.envelope(event.KindDenied, &hdr)
	e.Proc = &event.Proc{
		Pid:      int32(hdr.Pid),
		UID:      event.U32(r.Uid),
		Comm:     cString(hdr.Comm[:]),
		CgroupID: hdr.CgroupId,
		Syscall:  name,
		Errno:    errno,
		Signal:   signal,
	}
	return e, nil, nil
}
