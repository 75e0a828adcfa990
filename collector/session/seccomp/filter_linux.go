//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data: the syscall number, the arch, and the low
// 32 bits of the first argument (both architectures are little-endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
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

// program returns the filter's classic BPF program. clone3 gets
// clone3Action when user namespaces are refused. Every check is a
// comparison followed by its return, so no jump spans more than the three
// instructions of the CLONE_NEWUSER test.
func (f *Filter) program(clone3Action uint32) []unix.SockFilter {
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
		case "clone", "unshare":
			continue // by their flags, below
		case "clone3":
			p = append(p, jump(jeq, numbers[name], 0, 1), ret(clone3Action))
		default:
			p = append(p, jump(jeq, numbers[name], 0, 1), ret(errno(unix.EPERM)))
		}
	}
	if f.Refuses(UserNamespaces) {
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
// TSYNC: the other threads of the process keep running unfiltered). It
// returns the notification listener's fd with SECCOMP_FILTER_FLAG_NEW_LISTENER
// in flags, else -1.
func install(prog []unix.SockFilter, flags uintptr) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("setting no_new_privs: %w", err)
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return -1, fmt.Errorf("installing seccomp filter: %w", e)
	}
	if flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
		return -1, nil
	}
	fd := int(r)
	// The kernel makes it close-on-exec; the agent must never hold it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("setting close-on-exec on the seccomp listener: %w", err)
	}
	return fd, nil
}

// Start installs the filter, with no_new_privs, on the calling goroutine's
// OS thread and calls start, which forks the session's first process from
// that thread (exec.Cmd.Start): the child inherits the filter, and keeps it
// across exec. The thread must be locked (runtime.LockOSThread) and never
// unlocked, so that no other goroutine ever runs filtered and the Go runtime
// ends the thread when its goroutine returns; Go creates new threads for a
// locked one from its template thread, so none inherits the filter.
//
// The fork itself is clone3 (CLONE_INTO_CGROUP), which the filter refuses
// unless user namespaces are allowed. So the filter hands clone3 to a
// listener (SECCOMP_RET_USER_NOTIF) that lets only this thread's own call
// through, and is closed when start returns: from then on the kernel
// answers every clone3 of the session with ENOSYS itself, and nothing waits
// on the daemon. It returns start's error, or an error installing the
// filter.
func (f *Filter) Start(start func() error) error {
	if !f.Refuses(UserNamespaces) {
		if _, err := install(f.program(unix.SECCOMP_RET_ALLOW), 0); err != nil {
			return err
		}
		return start()
	}
	// The listener needs a P while this thread holds one through the fork
	// (a raw syscall): one P would deadlock.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("creating eventfd: %w", err)
	}
	defer unix.Close(stop)
	fd, err := install(f.program(unix.SECCOMP_RET_USER_NOTIF), unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	if err != nil {
		return err
	}
	// Closing the listener answers every pending and later clone3 with
	// ENOSYS, so a listener that fails closes it at once: the fork fails
	// instead of waiting for an answer.
	closeFd := sync.OnceFunc(func() { unix.Close(fd) })
	defer closeFd()
	done := make(chan error, 1)
	tid := int32(unix.Gettid())
	go func() {
		err := serve(fd, stop, tid)
		if err != nil {
			closeFd()
		}
		done <- err
	}()
	err = start()
	if _, werr := unix.Write(stop, []byte{1, 0, 0, 0, 0, 0, 0, 0}); werr != nil {
		return errors.Join(err, fmt.Errorf("stopping seccomp listener: %w", werr))
	}
	return errors.Join(err, <-done)
}

// notif and notifResp are struct seccomp_notif and seccomp_notif_resp.
type notif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type notifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// serve answers the notifications of fd until stop is readable: tid's
// clone3 goes on (SECCOMP_USER_NOTIF_FLAG_CONTINUE, safe because the caller
// is the launcher itself, whose arguments no one else can change), anything
// else fails with ENOSYS, as it does once the listener is closed.
func serve(fd, stop int, tid int32) error {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("polling seccomp listener: %w", err)
		}
		if pfd[1].Revents != 0 {
			return nil
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			if pfd[0].Revents != 0 {
				return nil // POLLHUP: no task uses the filter any more
			}
			continue
		}
		var n notif
		if err := ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOENT) {
				continue // the caller was interrupted or is gone
			}
			return fmt.Errorf("receiving seccomp notification: %w", err)
		}
		r := notifResp{id: n.id, error: -int32(unix.ENOSYS)}
		if int32(n.pid) == tid && n.nr == int32(numbers["clone3"]) {
			r.error, r.flags = 0, unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		}
		if err := ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("answering seccomp notification: %w", err)
		}
	}
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}
