//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoSpace is returned by Cleanup when preserving a workdir would leave
// less than preserveReserve of the data filesystem free: the journal's
// room comes first. The session stays terminated, its files in memory;
// Cleanup may be retried, with deleted or snapshot, say.
var ErrNoSpace = errors.New("session: not enough free space to preserve the workdir")

// preserveReserve is the fraction of the data filesystem that preserving
// a workdir must leave free.
const preserveReserve = 20 // 1/20: 5%

// roomFor checks that dst's filesystem can take used bytes and still keep
// its reserve free.
func roomFor(dst string, used int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("measuring data filesystem: %w", err)
	}
	avail := int64(st.Bavail) * st.Bsize
	reserve := int64(st.Blocks) * st.Bsize / preserveReserve
	if used > avail-reserve {
		return fmt.Errorf("%w: %d bytes, %d free, %d reserved", ErrNoSpace, used, avail, reserve)
	}
	return nil
}

// copyTree copies the tree at src into the existing directory dst, as
// root: regular files, directories and symlinks (as links, never
// followed), with their owners and modes; devices, fifos and sockets are
// skipped, as in a snapshot. Regular files are opened with O_NOFOLLOW.
// What own (the session's own uid, when not nil) owned becomes root's:
// the uid is given back at cleanup, and a later session that gets it must
// not own the copy.
func copyTree(ctx context.Context, src, dst string, own *uint32) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := copyEntry(p, to, info, rel != ".", own); err != nil {
			return fmt.Errorf("preserving %s: %w", rel, err)
		}
		return nil
	})
}

// copyEntry copies one entry from p to to; create is false for the root,
// which exists already. An entry that own owned becomes root's.
func copyEntry(p, to string, info fs.FileInfo, create bool, own *uint32) error {
	mode := info.Mode()
	switch {
	case mode.IsDir():
		if create {
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
		}
	case mode&fs.ModeSymlink != 0:
		link, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if err := os.Symlink(link, to); err != nil {
			return err
		}
	case mode.IsRegular():
		if err := copyFile(p, to); err != nil {
			return err
		}
	default:
		return nil
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if ok {
		uid := st.Uid
		if own != nil && uid == *own {
			uid = 0
		}
		if err := os.Lchown(to, int(uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if mode&fs.ModeSymlink != 0 {
		return nil
	}
	return os.Chmod(to, mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid))
}

func copyFile(p, to string) error {
	in, err := openNoFollow(p)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
