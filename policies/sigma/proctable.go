package sigma

import (
	"container/list"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// DefaultMaxProcs is the default bound on the process table.
const DefaultMaxProcs = 1 << 16

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
	argv    []string
	cmd     string
	cmdDone bool
}

func (p *procEntry) commandLine() string {
	if !p.cmdDone {
		p.cmd, p.cmdDone = strings.Join(p.argv, " "), true
	}
	return p.cmd
}

// procTable is a bounded table of live processes, filled from
// process.exec, process.fork and process.exit in stream order. When it is
// full, the least recently used entry is evicted and counted.
type procTable struct {
	max       int
	m         map[procKey]*list.Element
	lru       list.List
	evictions uint64
}

func newProcTable(max int) *procTable {
	if max < 1 {
		max = 1
	}
	return &procTable{max: max, m: map[procKey]*list.Element{}}
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
	if el, ok := t.m[p.key]; ok {
		el.Value = p
		t.lru.MoveToFront(el)
		return
	}
	for len(t.m) >= t.max {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.m, old.Value.(*procEntry).key)
		t.evictions++
	}
	t.m[p.key] = t.lru.PushFront(p)
}

func (t *procTable) remove(k procKey) {
	if el, ok := t.m[k]; ok {
		t.lru.Remove(el)
		delete(t.m, k)
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
		t.put(&procEntry{key: k, ppid: ppid, exe: p.Exe, exePath: p.ExePath, comm: p.Comm,
			argv: append([]string(nil), p.Argv...)})
	case event.KindFork:
		child := &procEntry{key: k, ppid: p.PPid, comm: p.Comm}
		if par := t.get(procKey{e.SessionID, p.PPid}); par != nil {
			child.exe, child.exePath, child.argv = par.exe, par.exePath, par.argv
			if child.comm == "" {
				child.comm = par.comm
			}
		}
		t.put(child)
	case event.KindExit:
		t.remove(k)
	}
}
