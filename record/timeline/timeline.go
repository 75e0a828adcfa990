// Package timeline rebuilds one session's process tree from its events,
// with its lifecycle, limit, loss and alert events in order beside it: the
// view of `sandtrail timeline`.
//
// A process whose fork or exit was not recorded (it started before the
// session's cgroup was watched, or a loss) is still in the tree, under its
// parent when the parent is known. A pid seen again after its exit, or with
// another start time, is a new process.
//
// Summarize is the summary `sandtrail run` prints when a session ends: its
// events counted from the journal, and the journal verified from where the
// session began.
package timeline

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/render"
)

// Timeline is one session's process tree and its other notable events.
type Timeline struct {
	SessionID string `json:"session_id"`
	Events    int    `json:"events"`
	// Lost sums the session's loss events: events it had that are not in
	// the record (each loss event is also a step).
	Lost      uint64  `json:"lost"`
	Processes []*Proc `json:"processes"`
	// Steps are the lifecycle, limit, loss and alert events, in order.
	Steps []Step `json:"steps"`
	// Packages are the session's packages, as `sandtrail packages` joins
	// them (record/pkgview).
	Packages []*pkgview.Package `json:"packages"`
	// DerivedAlerts are the alerts the package view's rules raise over
	// the session's events (pkgview.View.Alerts): not in the record
	// unless a daemon's watcher journaled them too.
	DerivedAlerts []*event.Event `json:"derived_alerts,omitempty"`
}

// Proc is one process of the tree.
type Proc struct {
	Pid       int32     `json:"pid"`
	PPid      int32     `json:"ppid,omitempty"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Argv      []string  `json:"argv,omitempty"`
	Truncated bool      `json:"argv_truncated,omitempty"`
	Exe       string    `json:"exe,omitempty"`
	Comm      string    `json:"comm,omitempty"`
	Cwd       string    `json:"cwd,omitempty"`
	UID       *uint32   `json:"uid,omitempty"`
	Execs     int       `json:"execs"`
	// ExecSeq is the seq of its first exec, if one was recorded.
	ExecSeq   uint64   `json:"exec_seq,omitempty"`
	Failed    []string `json:"exec_failed,omitempty"`
	ExitCode  *int32   `json:"exit_code,omitempty"`
	Signal    int32    `json:"signal,omitempty"`
	Exited    bool     `json:"exited"`
	Children  []*Proc  `json:"children,omitempty"`
	firstSeen uint64
}

// Duration is how long the process ran, when both ends are known.
func (p *Proc) Duration() (time.Duration, bool) {
	if p.Start.IsZero() || p.End.IsZero() {
		return 0, false
	}
	return p.End.Sub(p.Start), true
}

// Step is a lifecycle, limit, loss or alert event.
type Step struct {
	Seq    uint64    `json:"seq"`
	TS     time.Time `json:"ts"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
}

// Builder builds a Timeline from a session's events, added in journal
// order.
type Builder struct {
	tl    *Timeline
	byPid map[int32]*Proc
	all   []*Proc
	pkgs  *pkgview.Builder
}

// New starts the timeline of session id. Its packages are joined by a
// pkgview.Builder with opts: pass pkgview.WithShimDir with the configured
// shim directory, as `sandtrail packages` and the daemon do.
func New(id string, opts ...pkgview.Option) *Builder {
	return &Builder{tl: &Timeline{SessionID: id, Processes: []*Proc{}, Steps: []Step{}}, byPid: map[int32]*Proc{},
		pkgs: pkgview.New(opts...)}
}

// Add adds the event at seq.
func (b *Builder) Add(seq uint64, e *event.Event) {
	b.tl.Events++
	e.Seq = seq
	b.pkgs.Add(e)
	pr := e.Proc
	switch {
	case pr != nil && e.Kind == event.KindFork:
		b.node(pr, seq).PPid = pr.PPid
	case pr != nil && e.Kind == event.KindExec:
		p := b.node(pr, seq)
		p.PPid, p.Argv, p.Truncated, p.Exe, p.Comm, p.Cwd, p.UID = pr.PPid, pr.Argv, pr.ArgvTruncated, pr.Exe, pr.Comm, pr.Cwd, pr.UID
		if p.Execs == 0 {
			p.ExecSeq = seq
		}
		p.Execs++
	case pr != nil && e.Kind == event.KindExecFailed:
		p := b.node(pr, seq)
		name := pr.Exe
		if name == "" && len(pr.Argv) > 0 {
			name = pr.Argv[0]
		}
		p.Failed = append(p.Failed, render.Clean(name, 80)+" ("+pr.Errno+")")
	case pr != nil && e.Kind == event.KindExit:
		p := b.node(pr, seq)
		if p.PPid == 0 {
			p.PPid = pr.PPid
		}
		if p.Comm == "" {
			p.Comm = pr.Comm
		}
		p.ExitCode, p.Signal, p.Exited, p.End = pr.ExitCode, pr.Signal, true, e.TS
	default:
		if e.Loss != nil {
			b.tl.Lost += e.Loss.Count
		}
		switch e.Category() {
		case "session", "limit", "collector", "alert":
			b.tl.Steps = append(b.tl.Steps, Step{Seq: seq, TS: e.TS, Kind: e.Kind, Detail: render.Step(e)})
		}
	}
}

// node returns the process that pr names, a new one when its pid was not
// seen, exited, or started at another time.
func (b *Builder) node(pr *event.Proc, seq uint64) *Proc {
	p, start := b.byPid[pr.Pid], pr.StartTS
	if p != nil && !p.Exited && (start.IsZero() || p.Start.IsZero() || p.Start.Sub(start).Abs() < time.Millisecond) {
		if p.Start.IsZero() {
			p.Start = start
		}
		return p
	}
	p = &Proc{Pid: pr.Pid, Start: start, firstSeen: seq}
	b.byPid[pr.Pid] = p
	b.all = append(b.all, p)
	return p
}

// Timeline links each process under the latest process with its parent's
// pid that was seen before it, and returns the timeline.
func (b *Builder) Timeline() *Timeline {
	v := b.pkgs.View()
	b.tl.Packages, b.tl.DerivedAlerts = v.Packages, v.Alerts
	if b.tl.Packages == nil {
		b.tl.Packages = []*pkgview.Package{}
	}
	sort.SliceStable(b.all, func(i, j int) bool { return b.all[i].firstSeen < b.all[j].firstSeen })
	seen := map[int32]*Proc{}
	b.tl.Processes = []*Proc{}
	for _, p := range b.all {
		p.Children = nil
	}
	for _, p := range b.all {
		if par := seen[p.PPid]; par != nil && p.PPid != 0 && par != p {
			par.Children = append(par.Children, p)
		} else {
			b.tl.Processes = append(b.tl.Processes, p)
		}
		seen[p.Pid] = p
	}
	return b.tl
}

// Descendants counts the processes beneath p.
func (p *Proc) Descendants() int {
	n := len(p.Children)
	for _, c := range p.Children {
		n += c.Descendants()
	}
	return n
}

// Command is the process's command line as a shell would quote it,
// cleaned and cut at max runes, or its comm in brackets when no exec was
// recorded; a cut argv says so.
func (p *Proc) Command(max int) string {
	cmd := render.ShellJoin(p.Argv, max)
	if cmd == "" {
		cmd = "[" + render.Clean(p.Comm, 32) + "]"
	}
	if p.Truncated {
		cmd += " …(argv truncated)"
	}
	return cmd
}

// Attrs are the process's facts for people: cwd and uid (where they
// differ from parent's, when parent is given), how it ended, how long it
// ran, and its failed execs. Unless all, the failed execs of a PATH search
// (ENOENT in a process that then exec'd) are left out and counted in
// pathMisses.
func (p *Proc) Attrs(parent *Proc, all bool) (attrs []string, pathMisses int) {
	if p.Cwd != "" && (parent == nil || parent.Cwd != p.Cwd) {
		attrs = append(attrs, "cwd="+render.Clean(p.Cwd, 80))
	}
	if p.UID != nil && (parent == nil || parent.UID == nil || *parent.UID != *p.UID) {
		attrs = append(attrs, fmt.Sprintf("uid=%d", *p.UID))
	}
	switch {
	case p.Signal != 0:
		attrs = append(attrs, fmt.Sprintf("killed by signal %d", p.Signal))
	case p.ExitCode != nil:
		attrs = append(attrs, fmt.Sprintf("exit %d", *p.ExitCode))
	case !p.Exited:
		attrs = append(attrs, "no exit recorded")
	}
	if d, ok := p.Duration(); ok {
		attrs = append(attrs, d.Round(time.Microsecond).String())
	}
	for _, f := range p.Failed {
		if !all && p.Execs > 0 && strings.HasSuffix(f, "("+enoent+")") {
			pathMisses++
			continue
		}
		attrs = append(attrs, "exec failed: "+f)
	}
	return attrs, pathMisses
}

// enoent is the errno of a PATH search's miss.
const enoent = "ENOENT"
