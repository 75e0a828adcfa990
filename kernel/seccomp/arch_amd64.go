//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// nativeArch is seccomp_data.arch of the native ABI.
const nativeArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks the syscall numbers of the x32 ABI, which shares
// AUDIT_ARCH_X86_64 with the native one.
const x32Bit = 0x40000000

// numbers are the native syscall numbers of the names in groups.
var numbers = map[string]uint32{
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"clone":             unix.SYS_CLONE, "unshare": unix.SYS_UNSHARE, "clone3": unix.SYS_CLONE3,
	"setns": unix.SYS_SETNS,
	"bpf":   unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
	"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
	"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE,
	"delete_module": unix.SYS_DELETE_MODULE,
}
