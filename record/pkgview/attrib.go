package pkgview

import (
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// group is what the scripts of one package, run by one manager, did.
type group struct {
	eco, name, nameKey string
	// dir is where the package is installed, as the cwd of the process
	// that claimed it names it (npm: the cwd up to the deepest
	// node_modules/<name>); empty when the match says no place.
	dir              string
	managerPid       int32
	first            event.Event // TS only, for a kernel_only row
	procs            []Process
	files            []FileOp
	sensitive, other int
	omitted          int
	conns            []Conn
	// do is what the install-time behaviour rules remember of the
	// scripts; alerts the rules they raised while no row was the
	// group's (rowOf).
	do     conduct
	alerts []string
}

type groupKey struct {
	nameKey    string
	managerPid int32
	dir        string
}

// child returns a new process of parent (nil when unknown), which inherits
// its shim ancestry, managers, bypass mark and attribution.
func child(pid int32, parent *proc) *proc {
	p := &proc{pid: pid}
	if parent != nil {
		p.shim, p.under, p.managerPid = parent.shim || parent.image, parent.under|parent.self, parent.managerPid
		p.bypass, p.group, p.host = parent.bypass, parent.group, parent.host
		p.interp = parent.interp // a fork runs its parent's image until it execs
		p.shimPid = parent.shimPid
		if parent.image {
			p.shimPid = parent.pid
		}
	}
	return p
}

// keep stores p, unless a Watcher's bound is reached.
func (s *state) keep(p *proc) {
	if s.live && len(s.procs) >= maxProcs && s.procs[p.pid] == nil {
		s.dropped++
		return
	}
	s.procs[p.pid] = p
}

func (s *state) fork(e *event.Event) {
	if e.Proc == nil {
		return
	}
	parent := s.procs[e.Proc.PPid]
	p := child(e.Proc.Pid, parent)
	p.outside = parent == nil
	s.keep(p)
}

// exec classifies the new image of a process: a shim, a real manager
// (checked for a bypass), or a package's script.
func (s *state) exec(e *event.Event) {
	pr := e.Proc
	if pr == nil {
		return
	}
	p := s.procs[pr.Pid]
	if p == nil {
		parent := s.procs[pr.PPid]
		p = child(pr.Pid, parent)
		p.outside = parent == nil
		s.keep(p)
	}
	if p.outside && pr.UID != nil && *pr.UID == 0 {
		p.host = true
	}
	var m manager
	wasShim := p.image
	p.image = s.o.isShim(pr.Exe, pr.Cwd)
	switch {
	case p.image:
		p.viaShim = false // a shim is named for its manager, and is not one
	case wasShim:
		p.viaShim = true
	}
	p.interp = interpreterOf(pr)
	if !p.image {
		m = managerOf(pr.Exe, pr.Argv)
	}
	s.checkBypass(p, m, e)
	s.attribute(p, e)
	if m != 0 {
		p.self |= m
		if p.managerPid == 0 {
			p.managerPid = pr.Pid
		}
	}
}

// attribute records a script process of a package: one whose exec claims
// a package, or whose parent's did. A Watcher marks the process with its
// group, for the install-time behaviour rules, and records nothing more.
func (s *state) attribute(p *proc, e *event.Event) {
	pr := e.Proc
	match := MatchInherited
	if p.group == nil {
		c, ok := claimOf(p.under, pr.Exe, pr.Argv, pr.Cwd)
		if !ok {
			return
		}
		g := s.groupAt(c, scriptDir(c, pr.Cwd), p.managerPid, e)
		if g == nil {
			return
		}
		p.group, match = g, c.match
	}
	if s.live {
		return // a Watcher keeps no processes of a group, only its conduct
	}
	g := p.group
	if len(g.procs) >= maxProcsKept {
		return
	}
	g.procs = append(g.procs, Process{Seq: e.Seq, TS: e.TS, Pid: pr.Pid, PPid: pr.PPid, Exe: pr.Exe,
		Argv: pr.Argv, Cwd: pr.Cwd, UID: pr.UID, Match: match})
}

func (s *state) groupFor(c claim, managerPid int32, e *event.Event) *group {
	return s.groupAt(c, "", managerPid, e)
}

// groupAt is the group of a package's scripts run by one manager in one
// install directory (dir, empty when unknown); nil past a Watcher's bound.
func (s *state) groupAt(c claim, dir string, managerPid int32, e *event.Event) *group {
	nameKey, _ := keys(c.eco, c.name, "")
	k := groupKey{nameKey, managerPid, dir}
	if g := s.groups[k]; g != nil {
		return g
	}
	if s.live && len(s.groups) >= maxRows {
		s.dropped++
		return nil
	}
	g := &group{eco: c.eco, name: c.name, nameKey: nameKey, dir: dir, managerPid: managerPid,
		first: event.Event{TS: e.TS}}
	s.groups[k] = g
	return g
}

// scriptOf returns the group of the process of e, if it runs a package's
// script.
func (s *state) scriptOf(e *event.Event) *group {
	if s.live || e.Proc == nil {
		return nil
	}
	if p := s.procs[e.Proc.Pid]; p != nil {
		return p.group
	}
	return nil
}

func (s *state) file(e *event.Event) {
	g := s.scriptOf(e)
	if g == nil || e.File == nil {
		return
	}
	f := FileOp{Seq: e.Seq, TS: e.TS, Pid: e.Proc.Pid, Op: e.File.Op, Path: e.File.Path, NewPath: e.File.NewPath}
	f.Sensitive = Sensitive(f.Path) || f.NewPath != "" && Sensitive(f.NewPath)
	switch {
	case f.Sensitive && g.sensitive < maxSensitive:
		g.sensitive++
	case !f.Sensitive && g.other < maxFiles:
		g.other++
	default:
		g.omitted++
		return
	}
	g.files = append(g.files, f)
}

func (s *state) conn(e *event.Event) {
	g := s.scriptOf(e)
	if g == nil || e.Net == nil {
		return
	}
	if len(g.conns) >= maxConns {
		return
	}
	n := e.Net
	g.conns = append(g.conns, Conn{Seq: e.Seq, TS: e.TS, Pid: e.Proc.Pid, Op: n.Op, Proto: n.Proto,
		DstIP: n.DstIP, DstPort: n.DstPort, Domain: n.Domain, Verdict: n.Verdict})
}

// scriptDir is the install directory of the package an npm lifecycle
// script runs for: its cwd up to the deepest node_modules/<name> (the
// name the claim read there, @scope/name included); "" for other
// matches, or a cwd that does not have that form.
func scriptDir(c claim, cwd string) string {
	if c.match != MatchNpm {
		return ""
	}
	i := strings.LastIndex(cwd, "/node_modules/")
	if i < 0 {
		return ""
	}
	end := i + len("/node_modules/") + len(c.name)
	if !strings.HasPrefix(cwd[i+len("/node_modules/"):], c.name) || end < len(cwd) && cwd[end] != '/' {
		return ""
	}
	return cwd[:end]
}

// rowOf finds the row a script group belongs to: the row a claim put at
// the group's install directory (rowInstalledAt), else a row of its
// ecosystem and name that is not a bundled copy, preferring one the same
// manager installed, and the latest. A bundled copy is found only by its
// path: a script elsewhere is not its.
func (s *state) rowOf(g *group) *row {
	if r := s.rowInstalledAt(g); r != nil {
		return r
	}
	var best *row
	for _, r := range s.byName[g.nameKey] {
		if r.bundled {
			continue
		}
		if best == nil || r.pkg.Pid == g.managerPid || best.pkg.Pid != g.managerPid {
			best = r
		}
	}
	return best
}

// rowInstalledAt is the row of the group's name with the longest claimed
// install path that ends its directory (a claim's path is relative to its
// project, the directory absolute: /p/node_modules/a/node_modules/b is
// node_modules/a/node_modules/b's, not node_modules/b's), preferring the
// same manager's row, then the latest; nil when none is.
func (s *state) rowInstalledAt(g *group) *row {
	if g.dir == "" {
		return nil
	}
	var best *row
	bestLen := 0
	for _, r := range s.byName[g.nameKey] {
		for _, p := range r.pkg.Paths {
			if p == "" || g.dir != p && !strings.HasSuffix(g.dir, "/"+p) {
				continue
			}
			if len(p) > bestLen || len(p) == bestLen && (r.pkg.Pid == g.managerPid || best.pkg.Pid != g.managerPid) {
				best, bestLen = r, len(p)
			}
		}
	}
	return best
}
