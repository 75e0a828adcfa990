//go:build linux

package session

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// uidLockDir holds one lock file per session uid in use on this machine,
// for every manager whatever its root: /run is a tmpfs, so the locks do
// not outlive a reboot, and neither do the processes that held the uids.
const uidLockDir = "/run/sandtrail-uids"

// ownUID is a uid of a session's own and the lock that holds it.
type ownUID struct {
	uid  uint32
	lock *os.File
}

// allocUID takes the lowest uid of the manager's range that no other
// session on this machine holds (its lock file in uidLockDir is free), that
// no process runs with (a session of a lost host may still run under it),
// and that no account of /etc/passwd has. The lock lasts until release.
func (m *Manager) allocUID() (*ownUID, error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the session uid locks: %w", err)
	}
	var running map[uint32]bool
	for n := range m.uids.Count {
		uid := m.uids.First + n
		lock, err := lockUID(uid)
		if err != nil {
			return nil, err
		}
		if lock == nil {
			continue
		}
		if running == nil {
			running = processUIDs(m.uids)
		}
		if running[uid] || accountExists(uid) {
			lock.Close()
			continue
		}
		return &ownUID{uid: uid, lock: lock}, nil
	}
	return nil, fmt.Errorf("%w: all %d session uids from %d are in use", ErrNoUID, m.uids.Count, m.uids.First)
}

// lockUID takes the machine-wide lock of uid, or returns nil when another
// session holds it. Lock files are never removed: removing a locked file
// would let a second lock be taken on a new file of the same name.
func lockUID(uid uint32) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(uidLockDir, strconv.FormatUint(uint64(uid), 10)),
		os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening session uid lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("locking session uid: %w", err)
	}
	return f, nil
}

// release gives the uid back. The session's processes must be gone.
func (o *ownUID) release() {
	if o != nil && o.lock != nil {
		o.lock.Close()
		o.lock = nil
	}
}

// processUIDs returns the uids of r that some process on the machine has
// as its real, effective, saved or filesystem uid.
func processUIDs(r UIDRange) map[uint32]bool {
	out := map[uint32]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			rest, ok := strings.CutPrefix(line, "Uid:")
			if !ok {
				continue
			}
			for _, f := range strings.Fields(rest) {
				if v, err := strconv.ParseUint(f, 10, 32); err == nil && r.contains(uint32(v)) {
					out[uint32(v)] = true
				}
			}
			break
		}
	}
	return out
}

// accountExists reports whether an account of the machine has uid.
func accountExists(uid uint32) bool {
	_, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	return err == nil
}

// writePasswd writes the session's /etc/passwd to p: the host's, with the
// line of the account a.Name given uid (or, when the host has no such
// line, one added with a.GID, no home and no login shell). The session
// sees it, read-only, at /etc/passwd, so that its uid has the agent's name.
func writePasswd(p string, a *Agent, uid uint32) error {
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return fmt.Errorf("reading /etc/passwd: %w", err)
	}
	out := passwdFor(host, a, uid)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		return fmt.Errorf("writing the session's passwd: %w", err)
	}
	return nil
}

// passwdFor is writePasswd's content from the host's passwd file.
func passwdFor(host []byte, a *Agent, uid uint32) []byte {
	var out bytes.Buffer
	found := false
	sc := bufio.NewScanner(bytes.NewReader(host))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == a.Name {
			if found {
				continue
			}
			f[2] = strconv.FormatUint(uint64(uid), 10)
			line, found = strings.Join(f, ":"), true
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if !found {
		fmt.Fprintf(&out, "%s:x:%d:%d:sandtrail agent:/nonexistent:/usr/sbin/nologin\n", a.Name, uid, a.GID)
	}
	return out.Bytes()
}
