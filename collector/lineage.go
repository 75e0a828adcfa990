package collector

import (
	"container/list"
	"slices"
	"sync/atomic"
	"unicode/utf8"

	"github.com/sandtrail/sandtrail/record/event"
)

// The lineage of an exec is what the collector's own record of the
// kernel's process.fork, process.exec and process.exit events says about
// it: its ancestors (proc.ancestors) and the processes at the other ends
// of the pipes on its fd 0 and 1 (proc.stdin_from, proc.stdout_to). The
// table that holds that record is bounded in entries and bytes; what its
// bounds evict is counted (Stats.LineageEvicted), never waited for.
const (
	// maxLineageProcs and maxLineageProcBytes bound the processes the
	// table holds.
	maxLineageProcs     = 16384
	maxLineageProcBytes = 4 << 20
	// maxPipeEnds and maxPipeEndBytes bound each of the two maps of pipe
	// ends (writers and readers).
	maxPipeEnds     = 4096
	maxPipeEndBytes = 2 << 20
	// maxAncestorExe is the most bytes of an ancestor's exe kept: a longer
	// one keeps its end, after "…", as a cwd cut short does.
	maxAncestorExe = 256
	// maxPeerArgs and maxPeerArgvBytes bound the head of a pipe peer's
	// argv: its first 8 arguments, and at most 1 KiB of them in all (the
	// argument that crosses it is cut there).
	maxPeerArgs      = 8
	maxPeerArgvBytes = 1 << 10
	// lineageProcOverhead and pipeEndOverhead are what an entry costs
	// beyond its strings, counted against the byte bounds: the struct, its
	// list element and its map slot.
	lineageProcOverhead = 160
	pipeEndOverhead     = 128
)

// lineage is the table of the processes the kernel reported, keyed on
// pid, and of the pipe ends of their execs, keyed on the pipe's inode. It
// is owned by the decoder (the reader goroutine), which feeds it every
// fork, exec and exit in the order the kernel recorded them; only
// evicted is read elsewhere (Stats).
//
// A process's entry is made at its fork (with the comm the fork record
// carries and its parent's exe: a fork inherits both) and renamed at each
// of its execs (comm, exe_path). Its parent is the process that forked it,
// found by pid when the entry is made, and kept as a pointer: pid reuse
// cannot graft a stranger into a lineage. An entry of a pid that forks or
// execs anew as another process (another start time) is replaced. An
// exited process is kept only while some entry names it as parent, and
// removed with its last child; a removed entry ends every walk that
// reaches it.
//
// Pipe ends are snapshots (pid, comm, argv head) of the latest exec that
// had the pipe on its stdout (writers) or on its stdin (readers), kept
// after the process exits: `curl` may be gone before `sh` execs.
type lineage struct {
	procs map[int32]*lineageProc
	// lru orders the processes by their last use (fork, exec, exit, or
	// being named as an ancestor), the least recently used first.
	lru   list.List
	bytes int
	// writers and readers map a pipe's inode to the latest exec with the
	// pipe on fd 1 and on fd 0.
	writers, readers pipeEnds
	evicted          atomic.Uint64
}

// lineageProc is one process of the lineage table.
type lineageProc struct {
	pid int32
	// start is the process's start_boottime (ns), which tells two
	// processes of one pid apart.
	start     uint64
	comm, exe string
	parent    *lineageProc
	children  int // entries whose parent this is
	exited    bool
	removed   bool
	elem      *list.Element
	size      int
}

// newLineage returns an empty table.
func newLineage() *lineage {
	return &lineage{
		procs:   make(map[int32]*lineageProc),
		writers: pipeEnds{ends: make(map[uint64]*list.Element)},
		readers: pipeEnds{ends: make(map[uint64]*list.Element)},
	}
}

// Evicted is the number of entries (processes and pipe ends) the table's
// bounds evicted.
func (l *lineage) Evicted() uint64 {
	if l == nil {
		return 0
	}
	return l.evicted.Load()
}

// fork records the fork of pid, which started at start, by ppid, whose comm
// it inherits (as the fork record says) with its exe.
func (l *lineage) fork(pid, ppid int32, comm string, start uint64) {
	if l == nil {
		return
	}
	if e := l.procs[pid]; e != nil {
		l.remove(e) // the pid is another process now
	}
	e := l.add(pid, ppid, start)
	exe := ""
	if e.parent != nil {
		exe = e.parent.exe
	}
	l.rename(e, comm, exe)
	l.bound()
}

// exit records the exit of pid, which started at start.
func (l *lineage) exit(pid int32, start uint64) {
	if l == nil {
		return
	}
	e := l.procs[pid]
	if e == nil || e.start != start {
		return
	}
	e.exited = true
	if e.children == 0 {
		l.remove(e)
		return
	}
	l.lru.MoveToBack(e.elem)
}

// exec records the exec p (whose process started at start) and fills in
// its lineage: p.Ancestors, the parent first; p.StdinFrom, the latest exec
// with p's stdin pipe on its stdout; p.StdoutTo, the latest exec with p's
// stdout pipe on its stdin. Of a pipeline's two ends, the one that execs
// second therefore names the first. p.Argv must already be redacted.
func (l *lineage) exec(p *event.Proc, start uint64) {
	if l == nil {
		return
	}
	e := l.procs[p.Pid]
	if e == nil || e.start != start {
		if e != nil {
			l.remove(e)
		}
		e = l.add(p.Pid, p.PPid, start)
	}
	e.exited = false
	exe := p.ExePath
	if exe == "" {
		exe = p.Exe
	}
	l.rename(e, p.Comm, exe)
	p.Ancestors = l.ancestors(e)
	p.StdinFrom = l.writers.peer(p.StdinPipe, p.Pid)
	p.StdoutTo = l.readers.peer(p.StdoutPipe, p.Pid)
	if p.StdinPipe != 0 || p.StdoutPipe != 0 {
		self := &event.PipePeer{Pid: p.Pid, Comm: p.Comm, Argv: argvHead(p.Argv)}
		l.writers.put(p.StdoutPipe, self, &l.evicted)
		l.readers.put(p.StdinPipe, self, &l.evicted)
	}
	l.bound()
}

// add makes the entry of pid, a child of ppid when the table holds a
// process of that pid that started no later than it.
func (l *lineage) add(pid, ppid int32, start uint64) *lineageProc {
	e := &lineageProc{pid: pid, start: start, size: lineageProcOverhead}
	if p := l.procs[ppid]; p != nil && p.start <= start && ppid != pid {
		e.parent = p
		p.children++
	}
	e.elem = l.lru.PushBack(e)
	l.procs[pid] = e
	l.bytes += e.size
	return e
}

// rename sets the comm and exe of e and makes it the most recently used.
func (l *lineage) rename(e *lineageProc, comm, exe string) {
	exe = cutFront(exe, maxAncestorExe)
	l.bytes -= e.size
	e.comm, e.exe = comm, exe
	e.size = lineageProcOverhead + len(comm) + len(exe)
	l.bytes += e.size
	l.lru.MoveToBack(e.elem)
}

// ancestors lists e's ancestors, the parent first, up to the first one the
// table no longer holds or MaxAncestors; each is used again.
func (l *lineage) ancestors(e *lineageProc) []event.Ancestor {
	n := 0
	for a := e.parent; a != nil && !a.removed && n < event.MaxAncestors; a = a.parent {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]event.Ancestor, 0, n)
	for a := e.parent; len(out) < n; a = a.parent {
		out = append(out, event.Ancestor{Pid: a.pid, Comm: a.comm, Exe: a.exe})
		l.lru.MoveToBack(a.elem)
	}
	return out
}

// remove takes e out of the table, and with it each exited ancestor that
// no other entry names as parent any longer.
func (l *lineage) remove(e *lineageProc) {
	for e != nil && !e.removed {
		if l.procs[e.pid] == e {
			delete(l.procs, e.pid)
		}
		l.lru.Remove(e.elem)
		l.bytes -= e.size
		p := e.parent
		// What a removed entry still holds, for the walks of its
		// children that reach it, is only the mark.
		e.removed, e.parent, e.elem, e.comm, e.exe = true, nil, nil, "", ""
		if p == nil || p.removed {
			return
		}
		p.children--
		if !p.exited || p.children > 0 {
			return
		}
		e = p
	}
}

// bound evicts the least recently used processes while the table is over
// its bounds.
func (l *lineage) bound() {
	for len(l.procs) > maxLineageProcs || l.bytes > maxLineageProcBytes {
		front := l.lru.Front()
		if front == nil {
			return
		}
		l.remove(front.Value.(*lineageProc))
		l.evicted.Add(1)
	}
}

// pipeEnds maps a pipe's inode to the process at one end of it, the least
// recently used first, bounded by maxPipeEnds and maxPipeEndBytes.
type pipeEnds struct {
	ends  map[uint64]*list.Element
	lru   list.List
	bytes int
}

// pipeEnd is one entry of pipeEnds.
type pipeEnd struct {
	ino  uint64
	peer *event.PipePeer
	size int
}

// peer returns a copy of the process at this end of pipe ino, unless it is
// self; nil when none is known or ino is 0.
func (m *pipeEnds) peer(ino uint64, self int32) *event.PipePeer {
	if ino == 0 {
		return nil
	}
	el := m.ends[ino]
	if el == nil {
		return nil
	}
	m.lru.MoveToBack(el)
	p := el.Value.(*pipeEnd).peer
	if p.Pid == self {
		return nil
	}
	return &event.PipePeer{Pid: p.Pid, Comm: p.Comm, Argv: slices.Clone(p.Argv)}
}

// put makes p the process at this end of pipe ino (none for 0), evicting
// the least recently used ends beyond the bounds and counting them.
func (m *pipeEnds) put(ino uint64, p *event.PipePeer, evicted *atomic.Uint64) {
	if ino == 0 {
		return
	}
	size := pipeEndOverhead + len(p.Comm)
	for _, a := range p.Argv {
		size += len(a) + 16
	}
	if el := m.ends[ino]; el != nil {
		end := el.Value.(*pipeEnd)
		m.bytes += size - end.size
		end.peer, end.size = p, size
		m.lru.MoveToBack(el)
	} else {
		m.ends[ino] = m.lru.PushBack(&pipeEnd{ino: ino, peer: p, size: size})
		m.bytes += size
	}
	for len(m.ends) > maxPipeEnds || m.bytes > maxPipeEndBytes {
		front := m.lru.Front()
		end := m.lru.Remove(front).(*pipeEnd)
		delete(m.ends, end.ino)
		m.bytes -= end.size
		evicted.Add(1)
	}
}

// argvHead returns the first maxPeerArgs arguments of argv, at most
// maxPeerArgvBytes of them in all: the argument that crosses the bound is
// cut there (at a character boundary) and is the last.
func argvHead(argv []string) []string {
	n := min(len(argv), maxPeerArgs)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	left := maxPeerArgvBytes
	for _, a := range argv[:n] {
		if len(a) >= left {
			out = append(out, event.Cut(a, left))
			break
		}
		out = append(out, a)
		left -= len(a)
	}
	return out
}

// cutFront returns s when it is at most n bytes long, else "…" and the
// end of s, n bytes in all, not splitting a UTF-8 character.
func cutFront(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	i := len(s) - (n - len(ellipsis))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return ellipsis + s[i:]
}
