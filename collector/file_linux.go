//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// maxHeld bounds the file events held for merging; when it is reached every
// held merge is sent at once.
const maxHeld = 4096

// fileSyscalls are the syscalls file.c traces, by tracepoint name (umount is
// umount2's), and the id file_exit knows each by (its attach cookie). Those
// missing on an architecture (open, creat, unlink, rename, chmod, mkdir,
// symlink, link, ... on arm64) are skipped. ptrace is among them because
// file_exit records its requests too.
var fileSyscalls = []struct {
	name string
	sys  fileFileSys
}{
	{"openat", fileFileSysFILE_SYS_OPENAT}, {"openat2", fileFileSysFILE_SYS_OPENAT2},
	{"open", fileFileSysFILE_SYS_OPEN}, {"creat", fileFileSysFILE_SYS_CREAT},
	{"unlinkat", fileFileSysFILE_SYS_UNLINKAT}, {"unlink", fileFileSysFILE_SYS_UNLINK},
	{"rmdir", fileFileSysFILE_SYS_RMDIR},
	{"renameat2", fileFileSysFILE_SYS_RENAMEAT2}, {"renameat", fileFileSysFILE_SYS_RENAMEAT},
	{"rename", fileFileSysFILE_SYS_RENAME},
	{"mount", fileFileSysFILE_SYS_MOUNT}, {"umount", fileFileSysFILE_SYS_UMOUNT2},
	{"move_mount", fileFileSysFILE_SYS_MOVE_MOUNT},
	{"truncate", fileFileSysFILE_SYS_TRUNCATE}, {"ftruncate", fileFileSysFILE_SYS_FTRUNCATE},
	{"chmod", fileFileSysFILE_SYS_CHMOD}, {"fchmodat", fileFileSysFILE_SYS_FCHMODAT},
	{"fchmodat2", fileFileSysFILE_SYS_FCHMODAT2}, {"fchmod", fileFileSysFILE_SYS_FCHMOD},
	{"mkdirat", fileFileSysFILE_SYS_MKDIRAT}, {"mkdir", fileFileSysFILE_SYS_MKDIR},
	{"symlinkat", fileFileSysFILE_SYS_SYMLINKAT}, {"symlink", fileFileSysFILE_SYS_SYMLINK},
	{"linkat", fileFileSysFILE_SYS_LINKAT}, {"link", fileFileSysFILE_SYS_LINK},
	{"ptrace", fileFileSysFILE_SYS_PTRACE},
}

// fileCollector is the file part (bpf/file.c): the syscall tracepoints, the
// sensitive-read rules and the merging of repeated events.
type fileCollector struct {
	objs   fileObjects
	loaded bool

	// mu guards rules and keys and serialises updates of the kernel's
	// file_sensitive map.
	mu    sync.Mutex
	rules map[uint64]readRules // by owner: 0 for WithSensitiveReads, else a cgroup id
	keys  map[fileFileKey]uint32
	// anchors are the nonzero words of the kernel's file_anchor.
	anchors map[uint32]uint64
	// nodes number the trie nodes of the keys.
	nodes fileNodes
	// match decides reads by path in Go; swapped whole on every change.
	match atomic.Pointer[readMatcher]

	// Owned by the reader goroutine.
	scratch   fileFileEvent
	window    time.Duration
	held      map[mergeKey]*heldFile
	nextFlush time.Time
}

// readRules are absolute paths whose reads are sensitive, and exceptions.
type readRules struct{ sensitive, exceptions []string }

func (f *fileCollector) load(c *Collector, shared *ebpf.CollectionOptions) error {
	load := loadFile
	if !has(c.kernel, event.CapBTFCast) {
		load = loadFileCompat
	}
	spec, err := load()
	if err != nil {
		return fmt.Errorf("loading file bpf spec: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("counting possible cpus: %w", err)
	}
	spec.Maps[fileMapFileScratch].MaxEntries = uint32(ncpu)
	if n := spec.Maps[fileMapFileAnchor].MaxEntries; n != 1<<(anchorLog-6) {
		return fmt.Errorf("file_anchor has %d words, want %d (bpf/file.h and anchorLog disagree)", n, 1<<(anchorLog-6))
	}
	// Replaced by process.c's ring buffer, whose size must match.
	spec.Maps[fileMapEvents].MaxEntries = uint32(c.opts.ringSize)
	if err := spec.LoadAndAssign(&f.objs, shared); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading file bpf objects: %w", err)
	}
	f.loaded = true
	f.window = c.opts.mergeWindow
	f.held = make(map[mergeKey]*heldFile)
	f.keys = make(map[fileFileKey]uint32)
	f.anchors = make(map[uint32]uint64)
	f.rules = make(map[uint64]readRules)
	f.match.Store(&readMatcher{})
	c.dec.file = f
	if len(c.opts.sensitive)+len(c.opts.readExceptions) > 0 {
		return f.setRules(0, readRules{c.opts.sensitive, c.opts.readExceptions})
	}
	return nil
}

// attach attaches the exit program to the sys_exit tracepoint of every
// traced syscall that exists, with the syscall's id as the cookie.
func (f *fileCollector) attach(c *Collector) error {
	if !f.loaded {
		return nil
	}
	n := 0
	for _, sc := range fileSyscalls {
		tp := "sys_exit_" + sc.name
		l, err := link.Tracepoint("syscalls", tp, f.objs.FileExit, &link.TracepointOptions{Cookie: uint64(sc.sys)})
		if errors.Is(err, os.ErrNotExist) {
			c.log.Debug("syscall tracepoint missing, not traced", "syscall", sc.name)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: attaching tracepoint syscalls/%s: %v", ErrNotSupported, tp, err)
		}
		c.links = append(c.links, l)
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: none of the file syscall tracepoints exists", ErrNotSupported)
	}
	return nil
}

// programs names the program whose skipped runs lose file records.
func (f *fileCollector) programs() []progKind {
	if !f.loaded {
		return nil
	}
	return []progKind{{f.objs.FileExit, processEventKindKIND_FILE}}
}

func (f *fileCollector) close() {
	if f.loaded {
		f.objs.Close()
		f.loaded = false
	}
}

// counters is empty: every file record that is lost is lost in the ring
// buffer or by a skipped run, which the shared counters report.
func (f *fileCollector) counters() []*lossCounter { return nil }

// AddSensitive adds read rules for the session watched as cgroupID, such as
// its home directory's ~/.ssh and ~/.aws: reads beneath the absolute paths in
// prefixes are recorded, except beneath the paths in exceptions (see
// WithSensitiveReads; the rules apply to every process, and the nearest
// listed ancestor of a file decides). Calling it again for the cgroup
// replaces its rules; Unwatch removes them. It returns an error for a
// relative path or when the kernel's table (16384 names) is full, and
// ErrClosed after Close.
func (c *Collector) AddSensitive(cgroupID uint64, prefixes, exceptions []string) error {
	if err := checkAbs(prefixes, exceptions); err != nil {
		return err
	}
	if cgroupID == 0 {
		return fmt.Errorf("adding sensitive paths: cgroup id 0 is not a cgroup")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return c.file.setRules(cgroupID, readRules{slices.Clone(prefixes), slices.Clone(exceptions)})
}

// forget drops the read rules of a cgroup (at Unwatch).
func (f *fileCollector) forget(cgroupID uint64) error {
	if !f.loaded {
		return nil
	}
	f.mu.Lock()
	_, ok := f.rules[cgroupID]
	f.mu.Unlock()
	if !ok {
		return nil
	}
	return f.setRules(cgroupID, readRules{})
}

// setRules replaces the rules of owner and brings the kernel's table, the
// reads setting and the Go matcher in line with all rules.
func (f *fileCollector) setRules(owner uint64, r readRules) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(r.sensitive)+len(r.exceptions) == 0 {
		delete(f.rules, owner)
	} else {
		f.rules[owner] = r
	}
	want, m, err := compileRules(f.rules, &f.nodes)
	if err != nil {
		return err
	}
	// The bits of the keys (their directories' inodes, and the keys
	// themselves) go in before the keys and out after them: a read is
	// looked up in file_sensitive only where both are set.
	anchors := keyAnchors(want)
	if err := f.addAnchors(anchors); err != nil {
		return err
	}
	if err := f.syncKeys(want); err != nil {
		return err
	}
	f.nodes.release()
	if err := f.trimAnchors(anchors); err != nil {
		return err
	}
	if err := f.writeReadsMode(m); err != nil {
		return err
	}
	m.sort()
	f.match.Store(m)
	return nil
}

// compileRules turns the read rules of every owner into the Go matcher and
// the kernel keys that decide the same reads at the open (keysOf). Each
// key's verdict is the matcher's for the path the key names, so a key and
// the matcher never disagree.
func compileRules(rules map[uint64]readRules, nodes *fileNodes) (map[fileFileKey]uint32, *readMatcher, error) {
	m := &readMatcher{}
	var resolved []resolvedRule
	for _, rr := range rules {
		for _, l := range []struct {
			paths     []string
			sensitive bool
		}{{rr.sensitive, true}, {rr.exceptions, false}} {
			for _, p := range l.paths {
				p = filepath.Clean(p)
				m.add(p, l.sensitive)
				if p == "/" {
					if l.sensitive {
						m.all = true
					}
					continue
				}
				r, err := resolveRule(p)
				if err != nil {
					return nil, nil, err
				}
				if real := filepath.Join(append([]string{r.dir}, r.names...)...); real != p {
					m.add(real, l.sensitive)
				}
				resolved = append(resolved, r)
			}
		}
	}
	m.sort()
	want := map[fileFileKey]uint32{}
	for _, r := range resolved {
		if err := keysOf(r, m, nodes, want); err != nil {
			return nil, nil, err
		}
	}
	return want, m, nil
}

// resolvedRule is a rule's path with symbolic links resolved: an existing
// directory and the names beneath it. For a path that exists, names is its
// last component; for one that does not, the components missing beneath
// its nearest existing ancestor.
type resolvedRule struct {
	dir   string
	names []string
}

// resolveRule resolves the absolute path p (not "/").
func resolveRule(p string) (resolvedRule, error) {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if real == "/" {
			// A link to the root: everything beneath it.
			return resolvedRule{}, fmt.Errorf("sensitive path %q: resolves to /, list / itself", p)
		}
		return resolvedRule{filepath.Dir(real), []string{filepath.Base(real)}}, nil
	}
	var names []string
	for dir := p; ; dir = filepath.Dir(dir) {
		parent := filepath.Dir(dir)
		names = append([]string{filepath.Base(dir)}, names...)
		r, err := filepath.EvalSymlinks(parent)
		if err == nil {
			return resolvedRule{r, names}, nil
		}
		if parent == "/" {
			return resolvedRule{}, fmt.Errorf("resolving sensitive path %q: %w", p, err)
		}
	}
}

// keysOf adds to want the keys of r: the first name beneath the inode of
// r.dir, and each further (missing) name beneath the trie node of the one
// above it (bpf/file.h), with the verdict of m for the path each names.
// Past FILE_NODE_DEPTH nodes the last key is FILE_MAYBE, and Go decides the
// reads beneath it by their path.
func keysOf(r resolvedRule, m *readMatcher, nodes *fileNodes, want map[fileFileKey]uint32) error {
	var st unix.Stat_t
	if err := unix.Stat(r.dir, &st); err != nil {
		return fmt.Errorf("reading sensitive path %q: %w", r.dir, err)
	}
	dir, p := st.Ino, r.dir
	for i, name := range r.names {
		p = filepath.Join(p, name)
		v := uint32(fileFileVerdictFILE_EXCEPTION)
		if m.sensitive(p) {
			v = uint32(fileFileVerdictFILE_SENSITIVE)
		}
		last := i == len(r.names)-1
		var node uint32
		switch {
		case !last && i == int(fileFileVerdictFILE_NODE_DEPTH):
			v, last = uint32(fileFileVerdictFILE_MAYBE), true
		case !last:
			id, err := nodes.id(p)
			if err != nil {
				return err
			}
			node = id
		}
		putKey(want, fileKey(dir, name), v|node<<fileFileVerdictFILE_NODE_SHIFT)
		if last {
			return nil
		}
		dir = fileNodeIno | uint64(node)
	}
	return nil
}

// putKey adds the key k with value v to want. Two rules name one key when
// their paths are one directory entry (through links or bind mounts): a
// FILE_MAYBE verdict wins, then a sensitive one, and a node is kept.
func putKey(want map[fileFileKey]uint32, k fileFileKey, v uint32) {
	old, ok := want[k]
	if !ok {
		want[k] = v
		return
	}
	const mask = uint32(fileFileVerdictFILE_VERDICT_MASK)
	ov, nv := old&mask, v&mask
	verdict := min(ov, nv) // FILE_SENSITIVE before FILE_EXCEPTION
	if ov == uint32(fileFileVerdictFILE_MAYBE) || nv == uint32(fileFileVerdictFILE_MAYBE) {
		verdict = uint32(fileFileVerdictFILE_MAYBE)
	}
	node := old &^ mask
	if node == 0 {
		node = v &^ mask
	}
	want[k] = verdict | node
}

// fileNodeIno is bpf/file.h's FILE_NODE_INO: the ino of the keys beneath a
// trie node is fileNodeIno | node.
const fileNodeIno = 1 << 63

// fileNodes numbers the trie nodes of missing directories (bpf/file.h) by
// their paths, and keeps the numbers from one set of rules to the next, so
// that a change of rules rewrites few keys. A number freed by one change is
// reused only by a later one (after the kernel's keys have changed).
type fileNodes struct {
	ids  map[string]uint32
	used map[string]bool
	free []uint32
	next uint32
}

// maxNode is the largest node number a value holds above FILE_NODE_SHIFT.
const maxNode = 1<<(32-fileFileVerdictFILE_NODE_SHIFT) - 1

// id returns the number of the node of path p, numbering it if it is new.
func (n *fileNodes) id(p string) (uint32, error) {
	if n.ids == nil {
		n.ids, n.used = map[string]uint32{}, map[string]bool{}
	}
	n.used[p] = true
	if id, ok := n.ids[p]; ok {
		return id, nil
	}
	var id uint32
	switch {
	case len(n.free) > 0:
		id, n.free = n.free[len(n.free)-1], n.free[:len(n.free)-1]
	case n.next < maxNode:
		n.next++
		id = n.next
	default:
		return 0, fmt.Errorf("adding sensitive path %q: all %d trie nodes are in use", p, maxNode)
	}
	n.ids[p] = id
	return id, nil
}

// release frees the numbers of the nodes that id was not asked for since
// the last release.
func (n *fileNodes) release() {
	for p, id := range n.ids {
		if !n.used[p] {
			delete(n.ids, p)
			n.free = append(n.free, id)
		}
	}
	clear(n.used)
}

// keyAnchors returns the words of file_anchor that the keys need: the bits
// of their directories' inodes and of the keys themselves.
func keyAnchors(keys map[fileFileKey]uint32) map[uint32]uint64 {
	anchors := map[uint32]uint64{}
	for k := range keys {
		if k.Ino&fileNodeIno != 0 {
			continue // beneath a trie node: looked up without the bits
		}
		for _, b := range []uint32{anchorBit(k.Ino), nameBit(k)} {
			anchors[b/64] |= 1 << (b % 64)
		}
	}
	return anchors
}

// addAnchors sets the bits of anchors in file_anchor, keeping those
// already set.
func (f *fileCollector) addAnchors(anchors map[uint32]uint64) error {
	for w, bits := range anchors {
		if old := f.anchors[w]; old|bits != old {
			if err := f.objs.FileAnchor.Put(w, old|bits); err != nil {
				return fmt.Errorf("adding sensitive directory inodes: %w", err)
			}
			f.anchors[w] = old | bits
		}
	}
	return nil
}

// syncKeys makes file_sensitive hold exactly want.
func (f *fileCollector) syncKeys(want map[fileFileKey]uint32) error {
	for k, v := range want {
		if f.keys[k] == v {
			continue
		}
		if err := f.objs.FileSensitive.Put(k, v); err != nil {
			return fmt.Errorf("adding sensitive path %q: %w", cString(k.Name[:]), err)
		}
		f.keys[k] = v
	}
	for k := range f.keys {
		if _, ok := want[k]; !ok {
			if err := f.objs.FileSensitive.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing sensitive path %q: %w", cString(k.Name[:]), err)
			}
			delete(f.keys, k)
		}
	}
	return nil
}

// trimAnchors clears the bits of file_anchor that are not in anchors.
func (f *fileCollector) trimAnchors(anchors map[uint32]uint64) error {
	for w, bits := range f.anchors {
		if anchors[w] != bits {
			if err := f.objs.FileAnchor.Put(w, anchors[w]); err != nil {
				return fmt.Errorf("removing sensitive directory inodes: %w", err)
			}
			f.anchors[w] = anchors[w]
		}
		if anchors[w] == 0 {
			delete(f.anchors, w)
		}
	}
	return nil
}

// writeReadsMode tells the kernel which reads m needs: none, all, or those
// that file_sensitive decides.
func (f *fileCollector) writeReadsMode(m *readMatcher) error {
	mode := fileFileReadsFILE_READS_NONE
	switch {
	case m.all:
		mode = fileFileReadsFILE_READS_ALL
	case len(m.rules) > 0:
		mode = fileFileReadsFILE_READS_MAP
	}
	if err := f.objs.FileSettings.Put(uint32(fileFileConfigFILE_CONFIG_READS), uint32(mode)); err != nil {
		return fmt.Errorf("writing the file reads setting: %w", err)
	}
	return nil
}

// The bit set file_anchor (bpf/file.h): the bit of a directory (anchorBit)
// and of a key (nameBit).
const (
	anchorLog = 18
	anchorMul = 0x9e3779b97f4a7c15
	nameMul   = 0xff51afd7ed558ccd
	// shortName is the kernel's DNAME_INLINE_LEN: names shorter than it
	// are kept in the dentry, and only those are filtered by nameBit.
	shortName = 40
)

// anchorBit is the bit of the directory with inode number ino.
func anchorBit(ino uint64) uint32 { return uint32((ino * anchorMul) >> (64 - anchorLog)) }

// nameBit is the bit of the key k: of its directory's inode number, its
// name's length and the name's first eight bytes, zero-padded and read
// little-endian. The kernel looks up a name of shortName bytes or more
// without testing its bit, so the bit of such a key is set to no purpose.
func nameBit(k fileFileKey) uint32 {
	name := cString(k.Name[:])
	var w [8]byte
	copy(w[:], name)
	x := (k.Ino ^ uint64(len(name))<<56) * anchorMul
	x = (x ^ binary.LittleEndian.Uint64(w[:])) * nameMul
	return uint32(x >> (64 - anchorLog))
}

// fileKey returns the kernel key of the entry name beneath the directory (or
// trie node) ino; a name is cut at FILE_KEY_NAME - 1 bytes, like the
// kernel's copy.
func fileKey(ino uint64, name string) fileFileKey {
	k := fileFileKey{Ino: ino}
	for i := 0; i < len(name) && i < len(k.Name)-1; i++ {
		k.Name[i] = int8(name[i])
	}
	return k
}

// readMatcher decides reads by path: the longest rule that is the path or
// an ancestor of it decides.
type readMatcher struct {
	rules []readRule // longest first
	all   bool       // "/" is sensitive
}

type readRule struct {
	prefix    string
	sensitive bool
}

func (m *readMatcher) add(p string, sensitive bool) {
	for i, r := range m.rules {
		if r.prefix == p {
			// Sensitive wins over an exception of the same path.
			m.rules[i].sensitive = r.sensitive || sensitive
			return
		}
	}
	m.rules = append(m.rules, readRule{p, sensitive})
}

func (m *readMatcher) sort() {
	slices.SortStableFunc(m.rules, func(a, b readRule) int { return len(b.prefix) - len(a.prefix) })
}

// sensitive reports whether a read of the absolute path p is recorded.
func (m *readMatcher) sensitive(p string) bool {
	for _, r := range m.rules {
		if r.prefix == "/" || p == r.prefix || strings.HasPrefix(p, r.prefix+"/") {
			return r.sensitive
		}
	}
	return m.all
}

// mergeKey is what makes two file events identical. The comm is not in
// it: threads of one process may have different ones.
type mergeKey struct {
	session, kind, path, newPath, target, errno, source, fstype string
	pid                                                         int32
	uid                                                         uint32
	flags                                                       uint32
	cgroup                                                      uint64
	dir, symlink                                                bool
}

// heldFile is the merge of one mergeKey: the window it started, and the
// first repeat with how many repeats it stands for.
type heldFile struct {
	start time.Time
	ev    *event.Event
	n     uint64
}

func keyOf(ev *event.Event) mergeKey {
	k := mergeKey{session: ev.SessionID, kind: ev.Kind, path: ev.File.Path, newPath: ev.File.NewPath,
		target: ev.File.Target, errno: ev.File.Errno, source: ev.File.Source, fstype: ev.File.FSType,
		flags: ev.File.Flags, dir: ev.File.Dir, symlink: ev.File.Symlink}
	if p := ev.Proc; p != nil {
		k.pid, k.cgroup = p.Pid, p.CgroupID
		if p.UID != nil {
			k.uid = *p.UID
		}
	}
	return k
}

// merge takes a file event from the reader goroutine. The first of a kind
// is sent at once (it returns true); repeats within the merge window are
// held and counted (false), and sent as one event by flush.
func (f *fileCollector) merge(c *Collector, ev *event.Event) bool {
	if f.window <= 0 {
		return true
	}
	now := time.Now()
	k := keyOf(ev)
	h := f.held[k]
	if h != nil && now.Sub(h.start) < f.window {
		h.n++
		if h.ev == nil {
			h.ev = ev
		}
		return false
	}
	if h != nil {
		f.send(c, h)
	} else if len(f.held) >= maxHeld {
		f.flush(c, time.Time{})
	}
	f.held[k] = &heldFile{start: now}
	return true
}

// send sends the merged repeats of h, if any.
func (f *fileCollector) send(c *Collector, h *heldFile) {
	if h.n == 0 {
		return
	}
	if h.n > 1 {
		h.ev.File.Count = h.n
	}
	c.emit(h.ev)
	h.ev, h.n = nil, 0
}

// flush sends the merges whose window ended before now, or all of them
// when now is zero.
func (f *fileCollector) flush(c *Collector, now time.Time) {
	for k, h := range f.held {
		if now.IsZero() || now.Sub(h.start) >= f.window {
			f.send(c, h)
			delete(f.held, k)
		}
	}
}

// tick flushes ended merges, at most four times per window.
func (f *fileCollector) tick(c *Collector, now time.Time) {
	if len(f.held) == 0 || now.Before(f.nextFlush) {
		return
	}
	f.nextFlush = now.Add(f.window / 4)
	f.flush(c, now)
}
