//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"slices"
	"testing"
)

func TestRefused(t *testing.T) {
	all := []string{
		"io_uring_setup", "io_uring_enter", "io_uring_register", "clone", "unshare", "setns",
		"bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load",
		"init_module", "finit_module", "delete_module",
	}
	tests := []struct {
		name  string
		allow []string
		want  []string
	}{
		{"default", nil, all},
		{"io_uring", []string{"io_uring"}, all[3:]},
		{"user namespaces", []string{"user_namespaces"}, slices.Concat(all[:3], all[6:])},
		{"twice", []string{"bpf", "bpf"}, slices.Concat(all[:6], all[7:])},
		{"modules and kexec", []string{"kernel_modules", "kexec"}, all[:9]},
		{"everything", []string{"io_uring", "user_namespaces", "bpf", "perf_event_open", "userfaultfd", "kexec", "kernel_modules"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(tt.allow)
			if err != nil {
				t.Fatalf("New(%q): %v", tt.allow, err)
			}
			if got := f.Refused(); !slices.Equal(got, tt.want) {
				t.Errorf("New(%q).Refused() = %q, want %q", tt.allow, got, tt.want)
			}
		})
	}
}

func TestNewUnknownGroup(t *testing.T) {
	for _, s := range []string{"", "io-uring", "IO_URING", "clone", "all"} {
		if _, err := New([]string{s}); !errors.Is(err, ErrUnknownGroup) {
			t.Errorf("New([%q]) error = %v, want ErrUnknownGroup", s, err)
		}
	}
}

func TestGroupsHaveNumbers(t *testing.T) {
	for _, g := range Groups() {
		for _, s := range Syscalls(g) {
			if _, ok := numbers[s]; !ok {
				t.Errorf("syscall %s of group %s has no number", s, g)
			}
		}
	}
}
