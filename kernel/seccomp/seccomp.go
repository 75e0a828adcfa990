// Package seccomp builds and installs the seccomp filter of a session's
// processes: a classic BPF program, written here with the standard library
// and golang.org/x/sys/unix only (no cgo, no libseccomp), that refuses the
// syscalls an agent can use to get past the record or out of its sandbox,
// as Docker's and containerd's default profiles do:
//
//   - io_uring_setup, io_uring_enter and io_uring_register (group io_uring):
//     io_uring's reads and opens bypass the syscall tracepoints;
//   - clone and unshare with CLONE_NEWUSER, and setns into a user
//     namespace (group user_namespaces): a user namespace lets the agent
//     bind-mount /etc under its home;
//   - bpf, perf_event_open, userfaultfd, kexec_load and kexec_file_load,
//     init_module, finit_module and delete_module (groups bpf,
//     perf_event_open, userfaultfd, kexec, kernel_modules).
//
// A refused syscall fails with EPERM. clone3 is not refused, although its
// flags are out of the filter's reach behind a pointer (see Start): the
// kernel collector kills a child made in a new user namespace instead
// (collector.DenyUserNamespaces). Syscalls
// of another ABI than the native one (i386 and x32 on amd64, arm32
// on arm64) fail with ENOSYS: their numbers differ, so they would get past
// the list. A policy relaxes the filter by group (New).
//
// Trust model: the filter is installed by the session launcher, as root,
// with no_new_privs, on the thread that forks the session's first process,
// before that process runs; the kernel keeps it on every descendant across
// exec and fork, and a process can add filters but never remove one. The
// agent therefore cannot lift it. The collector records each refusal
// (process.denied) from the syscall's exit tracepoint.
package seccomp

import (
	"errors"
	"fmt"
	"slices"
)

// Errors returned by the package.
var (
	ErrUnknownGroup = errors.New("seccomp: unknown syscall group")
	ErrNotSupported = errors.New("seccomp: not supported on this platform")
)

// Group names a set of syscalls that the filter refuses unless a policy
// allows the group.
type Group string

// The groups, as the policy names them (sandbox.seccomp.allow).
const (
	IOURing        Group = "io_uring"
	UserNamespaces Group = "user_namespaces"
	BPF            Group = "bpf"
	PerfEvent      Group = "perf_event_open"
	Userfaultfd    Group = "userfaultfd"
	Kexec          Group = "kexec"
	KernelModules  Group = "kernel_modules"
)

// groups lists every group and the syscalls it refuses, in the order of the
// docs. clone and unshare are refused only with CLONE_NEWUSER, setns only
// into a user namespace (nstype CLONE_NEWUSER or 0).
var groups = []struct {
	g        Group
	syscalls []string
}{
	{IOURing, []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
	{UserNamespaces, []string{"clone", "unshare", "setns"}},
	{BPF, []string{"bpf"}},
	{PerfEvent, []string{"perf_event_open"}},
	{Userfaultfd, []string{"userfaultfd"}},
	{Kexec, []string{"kexec_load", "kexec_file_load"}},
	{KernelModules, []string{"init_module", "finit_module", "delete_module"}},
}

// Groups returns every group, in order.
func Groups() []Group {
	out := make([]Group, len(groups))
	for i, g := range groups {
		out[i] = g.g
	}
	return out
}

// Syscalls returns the syscalls that group g refuses, or nil for an unknown
// group.
func Syscalls(g Group) []string {
	for _, x := range groups {
		if x.g == g {
			return slices.Clone(x.syscalls)
		}
	}
	return nil
}

// ParseGroup returns the group named s. It returns an error wrapping
// ErrUnknownGroup for any other name.
func ParseGroup(s string) (Group, error) {
	if Syscalls(Group(s)) == nil {
		return "", fmt.Errorf("%w: %q (known: %v)", ErrUnknownGroup, s, Groups())
	}
	return Group(s), nil
}

// Filter is the filter of one session: every group refused except those
// allowed. The zero Filter refuses every group. It is immutable.
type Filter struct {
	allow []Group // sorted, no duplicates
}

// New returns the filter that refuses every group except allow. It returns
// an error wrapping ErrUnknownGroup for a name that is not a group.
func New(allow []string) (*Filter, error) {
	f := &Filter{}
	for _, s := range allow {
		g, err := ParseGroup(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(f.allow, g) {
			f.allow = append(f.allow, g)
		}
	}
	slices.Sort(f.allow)
	return f, nil
}

// Allowed returns the groups the filter lets through, sorted.
func (f *Filter) Allowed() []Group { return slices.Clone(f.allow) }

// Refuses reports whether the filter refuses group g.
func (f *Filter) Refuses(g Group) bool {
	return Syscalls(g) != nil && !slices.Contains(f.allow, g)
}

// Refused returns the syscalls the filter refuses, in the order of Groups.
func (f *Filter) Refused() []string {
	var out []string
	for _, g := range groups {
		if f.Refuses(g.g) {
			out = append(out, g.syscalls...)
		}
	}
	return out
}
