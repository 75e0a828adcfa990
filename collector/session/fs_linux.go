//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sessionFS is a session's own filesystem: a tmpfs of the session's disk
// size mounted at <dir>/fs (mode 0700, root's) on the host. Its work
// directory is bind-mounted on the workdir, <dir>/work, and it holds the
// upper layers of the session's private places. Everything the session's
// processes can write lands in it, so the kernel enforces the quota
// (ENOSPC), and none of it is on the host's disk.
type sessionFS struct {
	mnt     string // <dir>/fs
	workdir string // <dir>/work
	root    string // the manager's root, hidden in the session
	size    int64  // bytes; 0 is the tmpfs default, half of RAM
	// shared are host directories the session sees as they are even
	// beneath a private place (the ingest socket's directory).
	shared []string
	// passwd, when set, is the session's /etc/passwd (writePasswd), which
	// names the session's own uid.
	passwd string
}

// privatePlace is a world-writable directory of the host that each session
// sees as an overlay: the host's directory is its read-only lower layer,
// and everything the session writes or changes lands in the session's
// filesystem, under upper.
type privatePlace struct {
	path, upper string
}

// privatePlaces are the host's world-writable directories (find / -xdev
// -type d -perm -0002, and /dev/shm). One that the host lacks is skipped.
var privatePlaces = []privatePlace{
	{"/tmp", "tmp"},
	{"/var/tmp", "var-tmp"},
	{"/dev/shm", "shm"},
	{"/run/lock", "run-lock"},
}

// minInodes is the fewest inodes a sized session filesystem gets.
const minInodes = 8192

// newSessionFS mounts the session's filesystem at dir/fs, makes its work
// directory the workdir dir/work (which must exist, empty) and prepares
// the upper layers of the private places. On error it unmounts what it
// mounted.
func newSessionFS(dir, root string, size int64, shared []string) (_ *sessionFS, err error) {
	f := &sessionFS{mnt: filepath.Join(dir, "fs"), workdir: filepath.Join(dir, "work"), root: root, size: size, shared: shared}
	if err := os.Mkdir(f.mnt, 0o700); err != nil {
		return nil, fmt.Errorf("creating session filesystem mount point: %w", err)
	}
	opts := "mode=0700"
	if size > 0 {
		// Inodes too: size bounds the data pages, not the kernel memory of
		// millions of empty files. One per 4 KiB, at least minInodes.
		opts += ",size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(max(size/4096, minInodes), 10)
	}
	if err := unix.Mount("tmpfs", f.mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("mounting session filesystem: %w", err)
	}
	defer func() {
		if err != nil {
			f.unmount()
		}
	}()
	if err := f.mkdirs(); err != nil {
		return nil, err
	}
	if err := unix.Mount(filepath.Join(f.mnt, "work"), f.workdir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("mounting workdir: %w", err)
	}
	return f, nil
}

// mkdirs makes the work directory and, for each private place, an upper
// layer whose root has the host directory's owner and mode, and the
// overlay's work directory beside it.
func (f *sessionFS) mkdirs() error {
	if err := os.Mkdir(filepath.Join(f.mnt, "work"), 0o755); err != nil {
		return fmt.Errorf("creating workdir: %w", err)
	}
	for _, p := range privatePlaces {
		fi, err := os.Stat(p.path)
		if err != nil || !fi.IsDir() {
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		base := filepath.Join(f.mnt, p.upper)
		for _, d := range []string{base, filepath.Join(base, "upper"), filepath.Join(base, "work")} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return fmt.Errorf("creating private %s: %w", p.path, err)
			}
		}
		up := filepath.Join(base, "upper")
		if err := os.Chown(up, int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("creating private %s: %w", p.path, err)
		}
		if err := os.Chmod(up, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid)); err != nil {
			return fmt.Errorf("creating private %s: %w", p.path, err)
		}
	}
	return nil
}

// unshareMounts gives the calling OS thread a mount namespace of its own:
// a copy of the host's, a slave of it (nothing mounted in it propagates
// back). It must run on a locked thread that dies afterwards
// (cgroup.start's): unsharing the mount namespace also unshares the
// thread's filesystem context.
func unshareMounts() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unsharing the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the session's mounts slaves: %w", err)
	}
	return nil
}

// enter makes the mount namespace of the calling thread (unshareMounts')
// the session's: it detaches the copies of the other sessions' mounts
// (the directories others), so that they do not outlive those sessions'
// cleanups, mounts an overlay on each private place, hides the manager's
// root under an empty tmpfs except for this session's workdir, and binds
// back the shared directories that lie beneath a private place.
func (f *sessionFS) enter(others []string) error {
	for _, d := range others {
		for _, p := range []string{filepath.Join(d, "work"), filepath.Join(d, "fs")} {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("detaching another session's %s: %w", p, err)
			}
		}
	}
	// Take hold of what the overlays and the mask will hide first.
	fsfd, err := unix.Open(f.mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening session filesystem: %w", err)
	}
	defer unix.Close(fsfd)
	trees := map[string]int{}
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, p := range append([]string{f.workdir}, beneathAny(f.shared, placePaths())...) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("cloning %s: %w", p, err)
		}
		trees[p] = fd
	}
	if err := f.overlay(fsfd); err != nil {
		return err
	}
	if err := f.bindPasswd(); err != nil {
		return err
	}
	if err := f.mask(); err != nil {
		return err
	}
	for p, fd := range trees {
		if err := os.MkdirAll(p, 0o711); err != nil {
			return fmt.Errorf("creating mount point %s: %w", p, err)
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mounting %s in the session: %w", p, err)
		}
	}
	return nil
}

// overlay mounts each private place's overlay. The upper layers are named
// through fsfd, so that they stay reachable when the session's root lies
// beneath a private place (as in tests).
func (f *sessionFS) overlay(fsfd int) error {
	for _, p := range privatePlaces {
		base := fmt.Sprintf("/proc/self/fd/%d/%s", fsfd, p.upper)
		if _, err := os.Stat(base); err != nil {
			continue // the host has no such directory
		}
		opts := "lowerdir=" + p.path + ",upperdir=" + base + "/upper,workdir=" + base + "/work"
		if err := unix.Mount("overlay", p.path, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting private %s: %w", p.path, err)
		}
	}
	return nil
}

// bindPasswd mounts the session's passwd file, read-only, on /etc/passwd.
func (f *sessionFS) bindPasswd() error {
	if f.passwd == "" {
		return nil
	}
	if err := unix.Mount(f.passwd, "/etc/passwd", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting the session's passwd: %w", err)
	}
	if err := unix.Mount("", "/etc/passwd", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the session's passwd read-only: %w", err)
	}
	return nil
}

// mask hides the manager's root, and with it every other session's
// directory and preserved workdir, under an empty root-owned tmpfs.
func (f *sessionFS) mask() error {
	if err := unix.Mount("tmpfs", f.root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0711,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("hiding the sessions root: %w", err)
	}
	return nil
}

// placePaths are the paths of the private places.
func placePaths() []string {
	out := make([]string, len(privatePlaces))
	for i, p := range privatePlaces {
		out[i] = p.path
	}
	return out
}

// beneathAny returns the paths of dirs that lie strictly beneath one of
// places, cleaned, each once. A place itself is never shared: that would
// give the session the host's /tmp.
func beneathAny(dirs, places []string) []string {
	var out []string
	for _, d := range dirs {
		d = filepath.Clean(d)
		for _, p := range places {
			if rel, err := filepath.Rel(p, d); err == nil && rel != "." && filepath.IsLocal(rel) {
				if !slices.Contains(out, d) {
					out = append(out, d)
				}
				break
			}
		}
	}
	return out
}

// usage returns the bytes used in the session's filesystem and its size.
func (f *sessionFS) usage() (used, size int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(f.mnt, &st); err != nil {
		return 0, 0, fmt.Errorf("measuring session filesystem: %w", err)
	}
	size = int64(st.Blocks) * st.Bsize
	return size - int64(st.Bfree)*st.Bsize, size, nil
}

// unmountWork unmounts the workdir's bind, leaving the empty directory
// beneath it.
func (f *sessionFS) unmountWork() error {
	return umount(f.workdir)
}

// unmount unmounts the workdir and the session's filesystem, and removes
// its mount point. The files in it are gone.
func (f *sessionFS) unmount() error {
	err := errors.Join(umount(f.workdir), umount(f.mnt))
	if err != nil {
		return err
	}
	if err := os.Remove(f.mnt); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing session filesystem mount point: %w", err)
	}
	return nil
}

// umount unmounts p, lazily when it is busy; p not being a mount point
// (any more) is not an error.
func umount(p string) error {
	err := unix.Unmount(p, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(p, unix.MNT_DETACH)
	}
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmounting %s: %w", p, err)
}
