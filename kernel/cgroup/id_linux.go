package cgroup

import (
	"fmt"
	"os"
	"syscall"
)

// ID returns the id of the v2 cgroup whose directory is dir: the inode
// number of the directory, which is what bpf_get_current_cgroup_id
// returns.
func ID(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("reading cgroup id of %s: %w", dir, err)
	}
	return st.Ino, nil
}

// FileID returns the id of the v2 cgroup whose directory f is open on, so
// that the id belongs to the directory held open even if the path is
// renamed or replaced.
func FileID(f *os.File) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("reading cgroup id of %s: %w", f.Name(), err)
	}
	return st.Ino, nil
}
