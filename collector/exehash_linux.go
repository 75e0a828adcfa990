//go:build 386 || amd64 || arm64

package collector

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// The reasons written in proc.exe_sha256_missing.
const (
	// HashExited: the process had exited, and its file with it (or the file
	// at its path is another one now).
	HashExited = "exited"
	// HashReplaced: the process had exec'd another file (or its pid was
	// reused) before its file was opened.
	HashReplaced = "replaced"
	// HashChanged: the file was written to while it was hashed.
	HashChanged = "changed"
	// HashTooLarge: the file is larger than MaxHashSize.
	HashTooLarge = "too_large"
	// HashBusy: more files were waiting to be hashed than the queue holds.
	HashBusy = "busy"
	// HashUnreadable: the file could not be opened or read.
	HashUnreadable = "unreadable"
	// HashPending: the hash was not done within hashWait; it follows as
	// process.exe_hash.
	HashPending = "pending"
)

const (
	// MaxHashSize is the largest executable that is hashed.
	MaxHashSize = 512 << 20
	// hashCacheSize is how many file identities the hash cache holds.
	hashCacheSize = 4096
	// hashQueue bounds the exec events waiting for a hash.
	hashQueue = 512
	// hashWorkers is how many files are hashed at once.
	hashWorkers = 2
)

// exeID identifies the contents of an executed file: its device and inode,
// and its change time, which every write to it moves on.
type exeID struct {
	dev, ino  uint64
	ctimeSec  int64
	ctimeNsec uint32
}

// idOf returns the identity of an open file.
func idOf(st *unix.Stat_t) exeID {
	return exeID{dev: st.Dev, ino: st.Ino, ctimeSec: st.Ctim.Sec, ctimeNsec: uint32(st.Ctim.Nsec)}
}

// hashed is an exec event back from the hasher with its file's sum, or
// why there is none.
type hashed struct {
	ev           *event.Event
	sum, missing string
}

// hashJob is one file to hash and the exec events waiting for its sum.
type hashJob struct {
	id     exeID
	f      *os.File
	events []*event.Event
}

// exeHasher puts the sha256 of the executed file on exec events, computed
// once per exeID and kept in a bounded LRU cache. The reader goroutine calls
// fill and drains done; it never waits for a hash: a miss opens the file
// (/proc/PID/exe, which holds it even after the process exits) and hands it
// to a worker, and the event comes back on done with its sum; meanwhile the
// collector holds it and the events after it (releaseHeld). Events of the
// same file that miss while it is being hashed wait for the same job.
type exeHasher struct {
	jobs chan *hashJob
	// done returns hashed events to the reader, with their sums; it has
	// room for every event that can be waiting, so workers never block
	// on it. Only the reader writes the sum into the event.
	done chan hashed

	mu       sync.Mutex
	cache    map[exeID]*list.Element // of cacheEntry
	lru      *list.List
	inflight map[exeID]*hashJob
	waiting  int // events in jobs not yet sent to done
	wg       sync.WaitGroup
}

type cacheEntry struct {
	id  exeID
	sum string
}

func newExeHasher() *exeHasher {
	h := &exeHasher{
		jobs:     make(chan *hashJob, hashQueue),
		done:     make(chan hashed, hashQueue),
		cache:    make(map[exeID]*list.Element),
		lru:      list.New(),
		inflight: make(map[exeID]*hashJob),
	}
	for range hashWorkers {
		h.wg.Add(1)
		go h.work()
	}
	return h
}

// close stops the workers once the queued jobs are done.
func (h *exeHasher) close() {
	close(h.jobs)
	h.wg.Wait()
}

// pending reports how many events wait for a hash.
func (h *exeHasher) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting
}

// fill sets the hash of the file that the exec event ev executed (id) and
// returns true when ev can be emitted now: from the cache, or with the
// reason the hash is missing. It returns false when ev waits for a worker
// and will come back on done.
func (h *exeHasher) fill(ev *event.Event, id exeID) bool {
	if id.ino == 0 {
		ev.Proc.ExeSHA256Missing = HashUnreadable
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.cache[id]; ok {
		h.lru.MoveToFront(el)
		ev.Proc.ExeSHA256 = el.Value.(*cacheEntry).sum
		return true
	}
	if h.waiting >= hashQueue {
		ev.Proc.ExeSHA256Missing = HashBusy
		return true
	}
	if j, ok := h.inflight[id]; ok {
		j.events = append(j.events, ev)
		h.waiting++
		return false
	}
	f, reason := openExe(ev.Proc, id)
	if f == nil {
		ev.Proc.ExeSHA256Missing = reason
		return true
	}
	j := &hashJob{id: id, f: f, events: []*event.Event{ev}}
	h.inflight[id] = j
	h.waiting++
	h.jobs <- j // waiting < hashQueue: there is room
	return false
}

// openExe opens the file that the process of p executed, checking that it
// is still the file the kernel reported (id). /proc/PID/exe works while
// the process lives; after that, a file with a name is opened by its path
// (in the collector's mount namespace), and used only when it is the same
// file, unchanged.
func openExe(p *event.Proc, id exeID) (*os.File, string) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/exe", p.Pid))
	reason := HashReplaced
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ESRCH) {
			return nil, HashUnreadable
		}
		if p.Fileless {
			// A memfd or an unlinked file: the process that made it
			// may still hold it open.
			if f = openHeld(id); f == nil {
				return nil, HashExited
			}
			return f, ""
		}
		if !filepath.IsAbs(p.ExePath) || strings.HasSuffix(p.ExePath, " (deleted)") {
			return nil, HashExited
		}
		if f = openByPath(p.ExePath, id); f == nil {
			return nil, HashExited
		}
		reason = HashExited
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, HashUnreadable
	}
	if idOf(&st) != id && !overlaid(f, &st, id) {
		f.Close()
		return nil, reason
	}
	if st.Size > MaxHashSize {
		f.Close()
		return nil, HashTooLarge
	}
	return f, ""
}

// overlaid reports whether f, whose stat is st, is the file id seen
// through an overlay (a session's private /tmp): the kernel names the real
// layer's file (real_inode in bpf/process.c), which stat shows with the
// overlay's device for that layer but the same inode number and ctime.
func overlaid(f *os.File, st *unix.Stat_t, id exeID) bool {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil || fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return false
	}
	got := idOf(st)
	got.dev = id.dev
	return got == id
}

// maxHeldScan bounds the descriptors openHeld looks at.
const maxHeldScan = 1 << 16

// openHeld opens the file id through a descriptor some process still holds
// on it: the file a fileless exec ran (a memfd, an unlinked file) outlives
// a short-lived process in the one that made it. The descriptors of every
// process are looked at with stat (a link of /proc/PID/fd that is not id is
// never opened), at most maxHeldScan of them.
func openHeld(id exeID) *os.File {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	seen := 0
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if seen++; seen > maxHeldScan {
				return nil
			}
			var st unix.Stat_t
			path := dir + "/" + fd.Name()
			if unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || idOf(&st) != id {
				continue
			}
			if f := openByPath(path, id); f != nil {
				return f
			}
		}
	}
	return nil
}

// overlayExe returns the identity of the file process pid executed from an
// overlay, as stat of /proc/PID/exe shows it (ovl_getattr: the real
// layer's inode number and change time), for a kernel whose BTF does not
// describe the overlay's inode. It fails when the process has exited.
func overlayExe(pid int32) (exeID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", pid), &st); err != nil {
		return exeID{}, false
	}
	return idOf(&st), true
}

// openByPath opens the file at path for reading when it is the file id.
// The path is the agent's to change, so it is first opened with O_PATH,
// which opens nothing (a FIFO would block, a device could act), and only the
// file found to be id is opened for reading, through its descriptor.
func openByPath(path string, id exeID) *os.File {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || idOf(&st) != id {
		return nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil
	}
	return f
}

func (h *exeHasher) work() {
	defer h.wg.Done()
	for j := range h.jobs {
		sum, reason := hashFile(j.f, j.id)
		j.f.Close()
		h.mu.Lock()
		delete(h.inflight, j.id)
		if sum != "" {
			h.remember(j.id, sum)
		}
		events := j.events
		h.mu.Unlock()
		for _, ev := range events {
			h.done <- hashed{ev: ev, sum: sum, missing: reason}
		}
		// Only once they are in done: pending() counts an event until the
		// reader can drain it (finishHashes).
		h.mu.Lock()
		h.waiting -= len(events)
		h.mu.Unlock()
	}
}

// remember caches sum for id, evicting the least recently used entry when
// the cache is full. h.mu is held.
func (h *exeHasher) remember(id exeID, sum string) {
	if h.lru.Len() >= hashCacheSize {
		old := h.lru.Back()
		h.lru.Remove(old)
		delete(h.cache, old.Value.(*cacheEntry).id)
	}
	h.cache[id] = h.lru.PushFront(&cacheEntry{id: id, sum: sum})
}

// hashFile returns the hex sha256 of f, or why there is none: a file whose
// identity changed while it was read (a write moves its ctime) has no sum.
func hashFile(f *os.File, id exeID) (string, string) {
	s := sha256.New()
	n, err := io.Copy(s, io.LimitReader(f, MaxHashSize+1))
	if err != nil {
		return "", HashUnreadable
	}
	if n > MaxHashSize {
		return "", HashTooLarge
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", HashUnreadable
	}
	if idOf(&st) != id && !overlaid(f, &st, id) {
		return "", HashChanged
	}
	return hex.EncodeToString(s.Sum(nil)), ""
}
