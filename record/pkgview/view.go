package pkgview

import (
	"cmp"
	"path"
	"slices"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
)

// view copies the state out as a View: each row with its Seen, and each
// script group under its package's row, or under a kernel_only row of its
// own when no pkg event names the package, unless it is a host package's
// trigger (hostTrigger). Manifests still waiting for a decision are
// decided first (see flush).
func (s *state) view() *View {
	if len(s.placed) > 0 && s.last != nil {
		s.flush(s.last) // the record ends before the deciders' exits
	}
	v := &View{SessionID: s.session, Packages: []*Package{}, Alerts: slices.Clone(s.alerts)}
	if v.Alerts == nil {
		v.Alerts = []*event.Event{}
	}
	out := map[*row]*Package{}
	for _, r := range s.order {
		p := r.pkg
		p.Seqs = slices.Clone(p.Seqs)
		p.Alerts = slices.Clone(p.Alerts)
		p.Paths = slices.Clone(p.Paths)
		p.Seen = seenOf(r)
		out[r] = &p
		v.Packages = append(v.Packages, &p)
	}
	for _, g := range s.sortedGroups() {
		var p *Package
		if r := s.rowOf(g); r != nil {
			p = out[r]
		} else if hostTrigger(g) {
			continue
		} else {
			p = &Package{Ecosystem: g.eco, Name: g.name, Seen: SeenKernelOnly, Pid: g.managerPid, Time: g.first.TS, Seqs: []uint64{}}
			v.Packages = append(v.Packages, p)
		}
		p.Processes = append(p.Processes, g.procs...)
		p.Files = append(p.Files, g.files...)
		p.Connections = append(p.Connections, g.conns...)
		p.FilesOmitted += g.omitted
		for _, a := range g.alerts {
			p.Alerts = appendNew(p.Alerts, a)
		}
	}
	for _, p := range v.Packages {
		p.InstallActivity = activityOf(p)
	}
	slices.SortStableFunc(v.Packages, func(a, b *Package) int { return a.Time.Compare(b.Time) })
	return v
}

// hostTrigger reports whether every maintainer script of g is a dpkg
// trigger run as root ("<pkg>.postinst triggered ..."): dpkg runs the
// postinst of a package already on the machine when another package's
// install activates its trigger (man-db's, for any package with manual
// pages), so g's package is the host's, not one the session installed.
// A script of the same package run for anything else (configure,
// install) keeps the group a row.
func hostTrigger(g *group) bool {
	if g.eco != resolver.Deb {
		return false
	}
	n := 0
	for _, p := range g.procs {
		if p.Match != MatchDpkg {
			continue
		}
		if p.UID == nil || *p.UID != 0 || dpkgAction(p.Argv) != "triggered" {
			return false
		}
		n++
	}
	return n > 0
}

// dpkgAction is the argument that follows the maintainer script's path in
// argv (the script itself, or a shell's first argument): what dpkg asks
// the script to do.
func dpkgAction(argv []string) string {
	for i := range min(2, len(argv)-1) {
		if dpkgScript.MatchString(path.Clean(argv[i])) {
			return argv[i+1]
		}
	}
	return ""
}

func seenOf(r *row) string {
	switch {
	case r.blocked:
		return SeenBlocked
	case r.bundled:
		return SeenBundled
	case len(r.installs) > 0 && r.fetches > 0:
		return SeenBoth
	case len(r.installs) > 0:
		return SeenShimOnly
	}
	return SeenMirrorOnly
}

// sortedGroups returns the script groups in the order their first process
// started.
func (s *state) sortedGroups() []*group {
	gs := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int {
		if len(a.procs) == 0 || len(b.procs) == 0 {
			return a.first.TS.Compare(b.first.TS)
		}
		return cmp.Compare(a.procs[0].Seq, b.procs[0].Seq)
	})
	return gs
}

// activityOf is a row's InstallActivity: whether its scripts ran, or
// nothing ran at install time; none for a refused request.
func activityOf(p *Package) string {
	switch {
	case p.Seen == SeenBlocked:
		return ""
	case len(p.Processes) > 0:
		return ActivityScripts
	}
	return ActivityNone
}
