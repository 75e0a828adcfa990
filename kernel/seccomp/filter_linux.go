//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data: the syscall number, the arch, and the low
// 32 bits of the first argument (both architectures are little-endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

func ret(action uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, action) }

func errno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA }

const (
	ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
)

// program returns the filter's classic BPF program. Every check is a
// comparison followed by its return, so no jump spans more than the three
// instructions of the CLONE_NEWUSER test.
func (f *Filter) program() []unix.SockFilter {
	p := []unix.SockFilter{
		stmt(ldAbs, offArch),
		jump(jeq, nativeArch, 1, 0),
		ret(errno(unix.ENOSYS)),
		stmt(ldAbs, offNr),
	}
	if x32Bit != 0 {
		p = append(p, jump(jset, x32Bit, 0, 1), ret(errno(unix.ENOSYS)))
	}
	for _, name := range f.Refused() {
		switch name {
		case "clone", "unshare", "setns":
			continue // by their flags, below
		default:
			p = append(p, jump(jeq, numbers[name], 0, 1), ret(errno(unix.EPERM)))
		}
	}
	if f.Refuses(UserNamespaces) {
		// setns into a user namespace (nstype CLONE_NEWUSER, or 0: any
		// kind, as the fd says), such as one a clone3 child made before
		// the collector killed it; other kinds need no such refusal.
		p = append(p,
			jump(jeq, numbers["setns"], 0, 5),
			stmt(ldAbs, offArg1),
			jump(jeq, 0, 2, 0),
			jump(jset, unix.CLONE_NEWUSER, 1, 0),
			ret(unix.SECCOMP_RET_ALLOW),
			ret(errno(unix.EPERM)),
		)
		p = append(p,
			jump(jeq, numbers["clone"], 1, 0),
			jump(jeq, numbers["unshare"], 0, 3),
			stmt(ldAbs, offArg0),
			jump(jset, unix.CLONE_NEWUSER, 0, 1),
			ret(errno(unix.EPERM)),
		)
	}
	return append(p, ret(unix.SECCOMP_RET_ALLOW))
}

// install sets no_new_privs and installs prog on the calling thread (no
// TSYNC: the other threads of the process keep running unfiltered).
func install(prog []unix.SockFilter) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("installing seccomp filter: %w", e)
	}
	return nil
}

// Start installs the filter, with no_new_privs, on the calling goroutine's
// OS thread and calls start, which forks the session's first process from
// that thread (exec.Cmd.Start): the child inherits the filter, and keeps it
// across exec. The thread must be locked (runtime.LockOSThread) and never
// unlocked, so that no other goroutine ever runs filtered and the Go runtime
// ends the thread when its goroutine returns; Go creates new threads for a
// locked one from its template thread, so none inherits the filter.
//
// clone3 is let through: the launcher's own fork is a clone3
// (CLONE_INTO_CGROUP), and any clone3 rule the launcher's thread carries,
// the agent inherits. A listener (SECCOMP_RET_USER_NOTIF) in this process
// that lets only the launcher's call through deadlocks: the launcher holds
// its scheduler slot through the fork, and a stop-the-world of the garbage
// collector then waits for it while the listener waits for the world. It
// returns start's error, or an error installing the filter.
func (f *Filter) Start(start func() error) error {
	if err := install(f.program()); err != nil {
		return err
	}
	return start()
}
