//go:build linux

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	cgroups "github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/record/event"
)

// stateFile is the name of a session's state file in its directory.
const stateFile = "session.json"

// sessionState is what a session's state file, <root>/<id>/session.json
// (root's, 0600), says about it: enough for a later manager to end and
// clean up the session when the manager that created it died before it
// could (Abandoned). The manager that owns the session holds an exclusive
// flock on the file for as long as it knows the session; the kernel
// releases it when that manager's process dies, however it dies.
type sessionState struct {
	ID       string       `json:"id"`
	Tenant   string       `json:"tenant,omitempty"`
	User     string       `json:"user,omitempty"`
	Template string       `json:"template,omitempty"`
	Image    string       `json:"image,omitempty"`
	Limits   event.Limits `json:"limits"`
	// V2 and V1 are the session's cgroup directories (V1 by controller),
	// written before they are created.
	V2 Dir            `json:"v2"`
	V1 map[string]Dir `json:"v1,omitempty"`
	// UID is the session's own uid (Spec.Agent), when it has one.
	UID *uint32 `json:"uid,omitempty"`
}

// plannedCgroups returns the directories that newCgroup creates for a
// session named name beneath the layout l: the v2 cgroup and one per v1
// hierarchy that may provide a controller (whether or not it will).
func plannedCgroups(l *Layout, name string) (Dir, map[string]Dir) {
	v2 := Dir{Path: filepath.Join(l.V2.Path, name), Rel: joinRel(l.V2.Rel, name)}
	v1 := map[string]Dir{}
	for _, r := range []string{"memory", "pids", "cpu", "freezer"} {
		if p, ok := l.V1[r]; ok {
			v1[r] = Dir{Path: filepath.Join(p.Path, name), Rel: joinRel(p.Rel, name)}
		}
	}
	return v2, v1
}

// saveState creates the session's state file in its directory, locked,
// before the session's filesystem and cgroups are made: a manager that
// dies after this leaves nothing that a later one cannot find. The lock
// lasts until removeState, or the process's death.
func (s *Session) saveState() error {
	v2, v1 := plannedCgroups(s.m.layout, "sandtrail-"+s.spec.ID)
	sp := s.spec
	b, err := json.Marshal(&sessionState{ID: sp.ID, Tenant: sp.Tenant, User: sp.User, Template: sp.Template,
		Image: sp.Image, Limits: sp.Limits, V2: v2, V1: v1, UID: s.ownUIDOrNil()})
	if err != nil {
		return fmt.Errorf("encoding session state: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, stateFile), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating session state: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("locking session state: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("writing session state: %w", err)
	}
	s.stateF = f
	return nil
}

// lockAbandoned opens the state file in dir and takes its lock. It returns
// nil, nil when another open file holds the lock (a live manager owns the
// session: even this one, whose own lock is on another open file) or when
// dir has no state file.
func lockAbandoned(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, stateFile), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening session state: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("locking session state: %w", err)
	}
	return f, nil
}

// readState reads a locked state file. A file that does not parse (its
// manager died while writing it) gives the state of the id alone: the
// session's cgroups are then found beneath this manager's own.
func readState(f *os.File, id string) *sessionState {
	st := &sessionState{}
	b, err := os.ReadFile(f.Name())
	if err != nil || json.Unmarshal(b, st) != nil || st.ID != id {
		return &sessionState{ID: id}
	}
	return st
}

// removeState removes the session's state file and releases its lock.
func (s *Session) removeState() error {
	if s.stateF == nil {
		return nil
	}
	err := os.Remove(s.stateF.Name())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing session state: %w", err)
	}
	s.stateF.Close()
	s.stateF = nil
	return nil
}

// Abandoned finds the sessions that a manager before this one left behind
// beneath the same root when its process died without ending them (a
// SIGKILL, a crash): the session directories whose state file no live
// manager holds locked. It adopts each: it takes the state file's lock,
// finds the session's cgroups (those its state names and those of its
// name beneath this manager's own) and its filesystem's mounts, and
// returns it as a running session without a main process. The caller ends
// each with Terminate(ctx, ReasonHostLost, nil), which kills what is still
// running in its cgroups, and then cleans it up. A session directory that
// cannot be adopted is skipped, and its error joined into the one
// returned with the sessions that could.
func (m *Manager) Abandoned(ctx context.Context) ([]*Session, error) {
	ents, err := os.ReadDir(m.root)
	if err != nil {
		return nil, fmt.Errorf("reading session root: %w", err)
	}
	var out []*Session
	var errs []error
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		id := e.Name()
		if !e.IsDir() || !idRE.MatchString(id) {
			continue
		}
		s, err := m.adopt(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("adopting session %s: %w", id, err))
			continue
		}
		if s != nil {
			out = append(out, s)
		}
	}
	return out, errors.Join(errs...)
}

// adopt makes the abandoned session id this manager's, or returns nil
// when it is not abandoned.
func (m *Manager) adopt(id string) (*Session, error) {
	m.mu.Lock()
	_, known := m.sessions[id]
	if !known {
		m.sessions[id] = nil // reserve
	}
	m.mu.Unlock()
	if known {
		return nil, nil
	}
	s, err := m.adopt1(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || s == nil {
		delete(m.sessions, id)
		return nil, err
	}
	m.sessions[id] = s
	if s.cg.id != 0 {
		m.byCgroup[s.cg.id] = s
	}
	return s, nil
}

func (m *Manager) adopt1(id string) (*Session, error) {
	dir := filepath.Join(m.root, id)
	f, err := lockAbandoned(dir)
	if err != nil || f == nil {
		return nil, err
	}
	st := readState(f, id)
	s := &Session{
		m: m, log: m.log.With("session_id", id), dir: dir, workdir: filepath.Join(dir, "work"),
		spec:     Spec{ID: id, Tenant: st.Tenant, User: st.User, Template: st.Template, Image: st.Image, Limits: st.Limits},
		mainDone: make(chan struct{}), terminated: make(chan struct{}), stopMon: make(chan struct{}), monDone: make(chan struct{}),
		stateF: f, adopted: true, state: stateRunning,
	}
	s.fs = &sessionFS{mnt: filepath.Join(dir, "fs"), workdir: s.workdir, root: m.root, size: st.Limits.DiskBytes}
	if st.UID != nil {
		s.own = adoptUID(*st.UID)
	}
	cg, err := adoptCgroup(m.layout, "sandtrail-"+id, st)
	if err != nil {
		f.Close()
		s.own.release()
		return nil, err
	}
	s.cg = cg
	s.mon.init(s)
	return s, nil
}

// adoptUID takes back the machine-wide lock of an abandoned session's own
// uid, so that no new session gets it before the abandoned one is cleaned
// up. When another session holds it already, the session keeps the uid
// without its lock (its preserved files still become root's).
func adoptUID(uid uint32) *ownUID {
	o := &ownUID{uid: uid}
	if err := os.MkdirAll(uidLockDir, 0o700); err == nil {
		o.lock, _ = lockUID(uid)
	}
	return o
}

// adoptCgroup finds an abandoned session's cgroups: the directories its
// state names and those named name beneath the layout's cgroups, each
// only if it exists and is a cgroup named name. The session's v2 cgroup
// may be gone (its manager died before making it, or the machine
// rebooted): then the cgroup has no id and nothing to kill.
func adoptCgroup(l *Layout, name string, st *sessionState) (*cgroup, error) {
	c := &cgroup{v1: map[string]Dir{}}
	avail, err := readFields(filepath.Join(l.V2.Path, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	v2, v1 := plannedCgroups(l, name)
	cands := []Dir{st.V2, v2}
	for _, d := range cands {
		if isCgroupNamed(d.Path, name) {
			c.v2 = d
			break
		}
	}
	c.plan = l.plan(avail, true)
	if c.v2.Path != "" {
		if _, err := os.Stat(filepath.Join(c.v2.Path, "cgroup.freeze")); err != nil {
			c.plan = l.plan(avail, false)
		}
		c.dirs = append(c.dirs, c.v2.Path)
	}
	for _, r := range []string{"memory", "pids", "cpu", "freezer"} {
		for _, d := range []Dir{st.V1[r], v1[r]} {
			if !isCgroupNamed(d.Path, name) {
				continue
			}
			c.v1[r] = d
			if !slices.Contains(c.dirs, d.Path) {
				c.dirs = append(c.dirs, d.Path)
			}
			break
		}
	}
	if c.v2.Path == "" {
		c.gone = true
		return c, nil
	}
	fd, err := os.OpenFile(c.v2.Path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening session cgroup: %w", err)
	}
	c.fd = fd
	if c.id, err = cgroups.FileID(fd); err != nil {
		fd.Close()
		return nil, fmt.Errorf("reading session cgroup id: %w", err)
	}
	return c, nil
}

// isCgroupNamed reports whether p is an existing cgroup directory named
// name (a directory holding cgroup.procs): a state file's paths are used
// only when they are what a session's cgroups look like.
func isCgroupNamed(p, name string) bool {
	if p == "" || filepath.Base(p) != name {
		return false
	}
	_, err := os.Stat(filepath.Join(p, "cgroup.procs"))
	return err == nil
}

// mounted reports whether the session's filesystem is mounted at its
// mount point (it is not once cleaned up, or after a reboot).
func (f *sessionFS) mounted() bool {
	var mnt, dir unix.Stat_t
	if unix.Lstat(f.mnt, &mnt) != nil || unix.Lstat(filepath.Dir(f.mnt), &dir) != nil {
		return false
	}
	return mnt.Dev != dir.Dev
}
