package sigma

import (
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// view is one event as the matchers read it. It caches what is derived
// from the event (the command line, the parent, lower-cased values) so each
// is computed at most once per event, and only when a rule asks for it.
// One view is reused for every event an Evaluator observes.
type view struct {
	ev *Evaluator
	e  *event.Event

	gen        uint32
	lowGen     []uint32
	lowS       []string
	lowL       [][]string
	parentDone bool
	par        *procEntry
	selfDone   bool
	me         *procEntry
	cmdDone    bool
	cmd        string
	ansDone    bool
	ansData    []string
	ansType    []string
}

func (v *view) reset(e *event.Event) {
	v.e = e
	v.gen++
	if v.gen == 0 {
		clear(v.lowGen)
		v.gen = 1
	}
	if len(v.lowGen) < len(allFields) {
		v.lowGen = make([]uint32, len(allFields))
		v.lowS = make([]string, len(allFields))
		v.lowL = make([][]string, len(allFields))
	}
	v.parentDone, v.par = false, nil
	v.selfDone, v.me = false, nil
	v.cmdDone, v.cmd = false, ""
	v.ansDone, v.ansData, v.ansType = false, v.ansData[:0], v.ansType[:0]
}

// lower returns the field's value lower-cased, for case-insensitive
// matching. strings.ToLower returns its argument when nothing changes, so
// lower-case text costs no allocation.
func (v *view) lower(f *field, val *value) {
	if v.lowGen[f.id] == v.gen {
		val.s, val.list = v.lowS[f.id], v.lowL[f.id]
		return
	}
	if f.typ == tStrs {
		var out []string
		for i, s := range val.list {
			l := strings.ToLower(s)
			if l != s && out == nil {
				out = make([]string, len(val.list))
				copy(out, val.list[:i])
			}
			if out != nil {
				out[i] = l
			}
		}
		if out != nil {
			val.list = out
		}
	} else {
		val.s = strings.ToLower(val.s)
	}
	v.lowGen[f.id], v.lowS[f.id], v.lowL[f.id] = v.gen, val.s, val.list
}

// commandLine is SigmaHQ's CommandLine: argv joined by spaces, and when
// argv was truncated, its recorded tail after it, so that what a padded
// command line ends with is still matched.
func (v *view) commandLine() string {
	if !v.cmdDone {
		v.cmdDone = true
		if p := v.e.Proc; p != nil && len(p.Argv) > 0 {
			v.cmd = joinArgs(p.Argv, tailOf(p))
		} else if self := v.self(); self != nil {
			v.cmd = self.commandLine()
		}
	}
	return v.cmd
}

// self is the table's entry for the event's own process, for the events
// whose proc names only the pid (the kernel's file and net events): what
// its last exec said. A process.exec is its own account and never reads
// the table, so an exec with an empty argv does not borrow the image the
// process had before it.
func (v *view) self() *procEntry {
	if !v.selfDone {
		v.selfDone = true
		if v.ev != nil && v.e.Kind != event.KindExec && v.e.Proc != nil && v.e.Proc.Pid != 0 {
			v.me = v.ev.procs.get(procKey{v.e.SessionID, v.e.Proc.Pid})
		}
	}
	return v.me
}

// image is SigmaHQ's Image of the event's process.
func (v *view) image() string {
	p := v.e.Proc
	if img := image(p.ExePath, p.Exe); img != "" || v.e.Kind == event.KindExec {
		return img
	}
	if self := v.self(); self != nil {
		return image(self.exePath, self.exe)
	}
	return ""
}

// cwd is SigmaHQ's CurrentDirectory of the event's process.
func (v *view) cwd() string {
	if p := v.e.Proc; p.Cwd != "" || v.e.Kind == event.KindExec {
		return p.Cwd
	}
	if self := v.self(); self != nil {
		return self.cwd
	}
	return ""
}

// tailOf is the recorded tail of a truncated argv.
func tailOf(p *event.Proc) []string {
	if p.ArgvTruncated {
		return p.ArgvTail
	}
	return nil
}

// joinArgs joins argv and then tail with single spaces. It does not
// allocate for a single argument.
func joinArgs(argv, tail []string) string {
	if len(tail) == 0 {
		switch len(argv) {
		case 0:
			return ""
		case 1:
			return argv[0]
		}
		return strings.Join(argv, " ")
	}
	all := make([]string, 0, len(argv)+len(tail))
	return strings.Join(append(append(all, argv...), tail...), " ")
}

// gainedRoot reports whether the event's process runs as root gained
// inside the session: for an exec, against the process's own entry (its
// fork) or its parent's; for any other event, against its own entry, so
// that a setuid(0) without an exec shows in its next file or net event.
func (v *view) gainedRoot() bool {
	p := v.e.Proc
	if p == nil || p.UID == nil || v.ev == nil {
		return false
	}
	var before *procEntry
	if v.e.Kind == event.KindExec {
		if before = v.ev.procs.get(procKey{v.e.SessionID, p.Pid}); before == nil {
			before = v.parent()
		}
	} else {
		before = v.self()
	}
	return gainedRoot(*p.UID, before)
}

// ppid is the event's parent pid, from the event or else from the process
// table.
func (v *view) ppid() int32 {
	p := v.e.Proc
	if p == nil {
		return 0
	}
	if p.PPid != 0 {
		return p.PPid
	}
	if v.ev == nil {
		return 0
	}
	if self := v.ev.procs.get(procKey{v.e.SessionID, p.Pid}); self != nil {
		return self.ppid
	}
	return 0
}

// parent is the table's entry for the event's parent process, or nil.
func (v *view) parent() *procEntry {
	if !v.parentDone {
		v.parentDone = true
		if v.ev != nil {
			if pp := v.ppid(); pp != 0 {
				v.par = v.ev.procs.get(procKey{v.e.SessionID, pp})
			}
		}
	}
	return v.par
}

// user is SigmaHQ's User: the uid's name if the Evaluator knows it, else
// the uid in decimal.
func (v *view) user(uid uint32) string {
	if v.ev != nil {
		if name, ok := v.ev.users[uid]; ok {
			return name
		}
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func (v *view) answers(typ bool) []string {
	if !v.ansDone {
		v.ansDone = true
		if n := v.e.Net; n != nil && n.DNS != nil {
			for _, a := range n.DNS.Answers {
				v.ansData = append(v.ansData, a.Data)
				v.ansType = append(v.ansType, a.Type)
			}
		}
	}
	if typ {
		return v.ansType
	}
	return v.ansData
}
