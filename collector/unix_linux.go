//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
)

// unixCollector is the unix-socket part. Where the kernel has the cgroup
// unix-socket hooks (Linux 6.7) it loads bpf/unix.c, which records and
// enforces unix connects and addressed sends; elsewhere bpf/unixsys.c,
// which records the same from the exits of connect, sendto and sendmsg and
// refuses nothing (the collector's capabilities say unix_enforce is
// missing).
type unixCollector struct {
	objs   unixObjects
	sys    unixsysObjects
	loaded bool
	// enforce is set when the hooks (objs) are loaded, else sys is.
	enforce bool
}

// The syscalls unixsys.c records, by tracepoint, with its enum unix_sys as
// the cookie.
var unixSyscalls = []struct {
	tp     string
	cookie uint64
}{{"sys_exit_connect", 0}, {"sys_exit_sendto", 1}, {"sys_exit_sendmsg", 2}}

func (u *unixCollector) load(c *Collector, shared *ebpf.CollectionOptions) error {
	u.enforce = has(c.kernel, event.CapUnixEnforce)
	load, objs, name := loadUnixsys, any(&u.sys), "unixsys"
	if u.enforce {
		load, objs, name = loadUnix, any(&u.objs), "unix"
	}
	spec, err := load()
	if err != nil {
		return fmt.Errorf("loading %s bpf spec: %w", name, err)
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	if u.enforce {
		opts.MapReplacements[unixMapEgressConf] = c.net.objs.EgressConf
	}
	for name, m := range shared.MapReplacements {
		opts.MapReplacements[name] = m
		if ms, ok := spec.Maps[name]; ok {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	if err := spec.LoadAndAssign(objs, opts); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading %s bpf objects: %w", name, err)
	}
	u.loaded = true
	if eg := c.opts.egress; eg != nil {
		return u.writeUnix(eg.EgressTable(), c.opts.unixAllowed)
	}
	return nil
}

func (u *unixCollector) attach(c *Collector) error {
	if !u.loaded {
		return nil
	}
	if !u.enforce {
		for _, sc := range unixSyscalls {
			l, err := link.Tracepoint("syscalls", sc.tp, u.sys.UnixSysExit, &link.TracepointOptions{Cookie: sc.cookie})
			if err != nil {
				return fmt.Errorf("%w: attaching tracepoint syscalls/%s: %v", ErrNotSupported, sc.tp, err)
			}
			c.links = append(c.links, l)
		}
		return nil
	}
	return c.attachCgroupHooks(
		cgroupHook{prog: u.objs.NetConnectUnix, typ: ebpf.AttachCgroupUnixConnect},
		cgroupHook{prog: u.objs.NetSendmsgUnix, typ: ebpf.AttachCgroupUnixSendmsg})
}

func (u *unixCollector) programs() []progKind {
	switch {
	case !u.loaded:
		return nil
	case !u.enforce:
		return []progKind{{u.sys.UnixSysExit, processEventKindKIND_NET_UNIX}}
	}
	return []progKind{
		{u.objs.NetConnectUnix, processEventKindKIND_NET_UNIX},
		{u.objs.NetSendmsgUnix, processEventKindKIND_NET_UNIX},
	}
}

func (u *unixCollector) counters() []*lossCounter { return nil }

func (u *unixCollector) close() {
	if u.loaded {
		u.objs.Close()
		u.sys.Close()
		u.loaded = false
	}
}

// unixKey returns the unix_allow entry of e for cgroup (0: every session).
func unixKey(cgroup uint64, e egress.UnixEntry) (netUnixKey, netUnixAllowVal) {
	var k netUnixKey
	var v netUnixAllowVal
	binary.NativeEndian.PutUint64(k.Data[:8], cgroup)
	n := copy(k.Data[8:], e.Name)
	switch {
	case e.Prefix:
	case e.Name[0] == 0:
		v.ExactLen = uint16(n)
	default:
		n++ // a pathname alone: its NUL too
	}
	k.Prefixlen = uint32(8+n) * 8
	return k, v
}

// allowUnix puts addrs (egress.ParseUnixEntry syntax) in the unix
// allowlist for cgroup, and returns the keys it wrote.
// Without the unix hooks nothing is enforced, and it writes nothing.
func (u *unixCollector) allowUnix(cgroup uint64, addrs []string) ([]netUnixKey, error) {
	if !u.loaded || !u.enforce {
		return nil, nil
	}
	var keys []netUnixKey
	for _, a := range addrs {
		e, err := egress.ParseUnixEntry(a)
		if err != nil {
			return keys, fmt.Errorf("allowing unix socket addresses: %w", err)
		}
		k, v := unixKey(cgroup, e)
		if err := u.objs.UnixAllow.Put(k, v); err != nil {
			return keys, fmt.Errorf("allowing unix socket address %q: %w", a, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// writeUnix writes the policy's unix allowlist and the collector's own
// always-allowed addresses (WithUnixAllowed) for every session.
func (u *unixCollector) writeUnix(t egress.Table, own []string) error {
	if _, err := u.allowUnix(0, own); err != nil {
		return err
	}
	_, err := u.allowUnix(0, t.UnixAllowed)
	return err
}
