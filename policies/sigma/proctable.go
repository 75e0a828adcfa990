package sigma

import (
	"container/list"

	"github.com/sandtrail/sandtrail/record/event"
)

// The default bounds of the process table: processes, and bytes of the
// strings it keeps (an argv can be 32 KiB).
const (
	DefaultMaxProcs     = 1 << 16
	DefaultMaxProcBytes = 64 << 20
)

// procKey names a live process: pids are per session (each session has
// its own pid namespace view in the kernel's record).
type procKey struct {
	session string
	pid     int32
}

// procEntry is what the table remembers of a process: its image as of its
// last exec (or its parent's, inherited by fork) and its parent.
type procEntry struct {
	key     procKey
	ppid    int32
	exe     string
	exePath string
	comm    string
	cwd     string
	// uid is the process's uid as of its last exec (or fork, when the
	// event said; else its parent's), when hasUID. gained is set when it
	// is 0 and the process, or an ancestor the table held, ran as another
	// uid before: root gained inside the session.
	uid    uint32
	hasUID bool
	gained bool
	// argv is the exec's argv, and the recorded tail of a truncated one.
	argv    []string
	cmd     string
	cmdDone bool
	size    int
}

func (p *procEntry) commandLine() string {
	if !p.cmdDone {
		p.cmd, p.cmdDone = joinArgs(p.argv, nil), true
	}
	return p.cmd
}

// entryOverhead approximates what an entry costs besides its strings.
const entryOverhead = 160

// sizeOf is what the table charges for an entry: its strings, twice for
// argv (the command line joined from it is kept too).
func sizeOf(p *procEntry) int {
	n := entryOverhead + len(p.key.session) + len(p.exe) + len(p.exePath) + len(p.comm) + len(p.cwd)
	for _, a := range p.argv {
		n += 2*len(a) + 1 + 16
	}
	return n
}

// procTable is a bounded table of live processes, filled from
// process.exec, process.fork and process.exit in stream order. When it
// holds max entries or maxBytes, the least recently used entries are
// evicted and counted.
type procTable struct {
	max       int
	maxBytes  int
	bytes     int
	m         map[procKey]*list.Element
	lru       list.List
	evictions uint64
}

func newProcTable(maxProcs, maxBytes int) *procTable {
	return &procTable{max: max(maxProcs, 1), maxBytes: max(maxBytes, 1), m: map[procKey]*list.Element{}}
}

func (t *procTable) get(k procKey) *procEntry {
	el, ok := t.m[k]
	if !ok {
		return nil
	}
	t.lru.MoveToFront(el)
	return el.Value.(*procEntry)
}

func (t *procTable) put(p *procEntry) {
	p.size = sizeOf(p)
	t.remove(p.key)
	for len(t.m) > 0 && (len(t.m) >= t.max || t.bytes+p.size > t.maxBytes) {
		t.remove(t.lru.Back().Value.(*procEntry).key)
		t.evictions++
	}
	t.m[p.key] = t.lru.PushFront(p)
	t.bytes += p.size
}

// shrink evicts the least recently used entries, but never the most
// recent, until the table is within its bytes.
func (t *procTable) shrink() {
	for len(t.m) > 1 && t.bytes > t.maxBytes {
		t.remove(t.lru.Back().Value.(*procEntry).key)
		t.evictions++
	}
}

func (t *procTable) remove(k procKey) {
	if el, ok := t.m[k]; ok {
		t.lru.Remove(el)
		delete(t.m, k)
		t.bytes -= el.Value.(*procEntry).size
	}
}

// update applies a process lifecycle event to the table: an exec replaces
// the process's image, a fork gives the child its parent's, an exit
// removes the process.
func (t *procTable) update(e *event.Event) {
	p := e.Proc
	if p == nil || p.Pid == 0 {
		return
	}
	k := procKey{e.SessionID, p.Pid}
	switch e.Kind {
	case event.KindExec:
		ppid := p.PPid
		if ppid == 0 {
			if old := t.get(k); old != nil {
				ppid = old.ppid
			}
		}

		argv := append(append(make([]string, 0, len(p.Argv)+len(tailOf(p))), p.Argv...), tailOf(p)...)
		old := t.get(k)
		before := old
		if before == nil {
			before = t.get(procKey{e.SessionID, ppid})
		}
		img := procEntry{key: k, ppid: ppid, exe: p.Exe, exePath: p.ExePath, comm: p.Comm, cwd: p.Cwd, argv: argv}
		img.setUID(p.UID, before)
		if old != nil {
			// The exec replaces the image of the entry its fork made.
			t.bytes -= old.size
			*old = img
			old.size = sizeOf(old)
			t.bytes += old.size
			t.shrink()
			return
		}
		t.put(&img)
	case event.KindFork:
		child := &procEntry{key: k, ppid: p.PPid, comm: p.Comm}
		par := t.get(procKey{e.SessionID, p.PPid})
		if par != nil {
			child.exe, child.exePath, child.cwd, child.argv = par.exe, par.exePath, par.cwd, par.argv
			if child.comm == "" {
				child.comm = par.comm
			}
		}
		child.setUID(p.UID, par)
		t.put(child)
	case event.KindExit:
		t.remove(k)
	}
}

// setUID sets the entry's uid from the event's (or, without one, before's)
// and whether it gained root, before being the process's own earlier
// entry or its parent's.
func (p *procEntry) setUID(uid *uint32, before *procEntry) {
	switch {
	case uid != nil:
		p.uid, p.hasUID = *uid, true
	case before != nil:
		p.uid, p.hasUID = before.uid, before.hasUID
	}
	p.gained = p.hasUID && gainedRoot(p.uid, before)
}

// gainedRoot reports whether a process now running as uid gained root
// inside the session: uid is 0, and before (its own earlier entry, or its
// parent's) ran as another uid or had gained root itself. A session whose
// agent runs as root, or processes the daemon started as root in it
// (the apt broker's, whose parent is outside the session), gain nothing.
func gainedRoot(uid uint32, before *procEntry) bool {
	return uid == 0 && before != nil && before.hasUID && (before.uid != 0 || before.gained)
}
