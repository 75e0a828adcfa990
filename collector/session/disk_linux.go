//go:build linux

package session

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// diskUsage returns the bytes allocated to the files under root, as du
// counts them (512-byte blocks, each inode once), visiting at most
// maxEntries entries. complete is false when the walk stopped at the cap.
// Symlinks are not followed. Entries that vanish during the walk are
// skipped; other errors are returned with the usage counted so far.
func diskUsage(root string, maxEntries int) (used int64, complete bool, err error) {
	seen := map[uint64]bool{}
	n := 0
	errStop := errors.New("stop")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if n++; n > maxEntries {
			return errStop
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			used += info.Size()
			return nil
		}
		if st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		used += st.Blocks * 512
		return nil
	})
	if errors.Is(err, errStop) {
		return used, false, nil
	}
	if err != nil {
		return used, true, fmt.Errorf("measuring workdir: %w", err)
	}
	return used, true, nil
}
