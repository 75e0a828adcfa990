// Package report builds one session's incident report from its events:
// its facts and verify status, its process tree with install scripts
// under their packages, its packages, a network view, the files it
// touched, its alerts with the events that raised them, its resource-limit
// events, its tool invocations and a timeline. It renders the report as
// one self-contained HTML page (WriteHTML: no external asset, no script,
// a Content-Security-Policy that forbids both), as Markdown for a pull
// request comment (WriteMarkdown), or as one line for a CI log (Line):
// the view of `sandtrail report`.
//
// Everything in a report but its own labels came from the record, which
// the agent wrote much of (argv, paths, domains, tool names): the HTML is
// built by html/template, which escapes every value for its context, and
// the Markdown sets every value as a code span after render.Clean, and
// the line goes through render.Clean.
//
// File events that are a package manager's bookkeeping (ecosystem.Noise)
// are counted (Files.Hidden) and left out unless built WithAll. A
// sensitive path (pkgview.Sensitive, by its path, new path or link
// target), and anything at or beneath a link the session made, is never
// left out. Each list is bounded (maxRows), saying what it left out.
package report

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/timeline"
	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

// Report is one session's report.
type Report struct {
	SessionID string    `json:"session_id"`
	Generated time.Time `json:"generated"`
	Facts     Facts     `json:"facts"`
	// Journal is the journal's verification from the session's first
	// event, as the caller made it (timeline.VerifyJournal).
	Journal   timeline.JournalSummary `json:"journal"`
	Processes []*timeline.Proc        `json:"processes"`
	// Scripts maps the exec seq of each process that a package's install
	// scripts started (timeline.Proc.ExecSeq) to the package's label.
	Scripts  map[uint64]string  `json:"scripts,omitempty"`
	Packages []*pkgview.Package `json:"packages"`
	Network  Network            `json:"network"`
	Files    Files              `json:"files"`
	Alerts   []Alert            `json:"alerts"`
	// Limits are the limit.hit and loss events; Lifecycle the session's.
	Limits    []timeline.Step `json:"limits"`
	Lifecycle []timeline.Step `json:"lifecycle"`
	Tools     []Tool          `json:"tools"`
	// Refs are the events that alerts name, by seq.
	Refs map[uint64]Ref `json:"refs,omitempty"`
	// Omitted counts what each list left out beyond its bound (maxRows):
	// "files", "names", "destinations", "tools", "marks".
	Omitted map[string]int `json:"omitted,omitempty"`
	// Spans are what the SVG timeline draws; chartMore counts the
	// processes it leaves out.
	Spans     []Span `json:"-"`
	chartMore int
	// all: built WithAll.
	all bool
	// Timeline is the session's timeline, from which the report's tree,
	// steps and packages come (the view of `sandtrail timeline`).
	Timeline *timeline.Timeline `json:"-"`
}

// Facts are the session's own facts and counts.
type Facts struct {
	User       string            `json:"user,omitempty"`
	Tenant     string            `json:"tenant,omitempty"`
	Host       string            `json:"host,omitempty"`
	Image      string            `json:"image,omitempty"`
	Limits     *event.Limits     `json:"limits,omitempty"`
	Start      time.Time         `json:"start,omitzero"`
	End        time.Time         `json:"end,omitzero"`
	Reason     string            `json:"reason,omitempty"`
	ExitStatus *int32            `json:"exit_status,omitempty"`
	FSState    string            `json:"fs_state,omitempty"`
	Events     int               `json:"events"`
	ByCategory map[string]uint64 `json:"by_category"`
	Lost       uint64            `json:"lost"`
}

// Duration is how long the session ran, when both ends are known.
func (f Facts) Duration() time.Duration {
	if f.Start.IsZero() || f.End.IsZero() {
		return 0
	}
	return f.End.Sub(f.Start)
}

// Network is what the session looked up and connected to.
type Network struct {
	Domains      []Domain      `json:"domains"`
	Destinations []Destination `json:"destinations"`
	// Blocked counts the blocked connection attempts, BlockedNames the
	// names whose lookups were blocked.
	Blocked      int `json:"blocked"`
	BlockedNames int `json:"blocked_names"`
}

// BlockedDestinations counts the destinations with a blocked attempt.
func (n Network) BlockedDestinations() int {
	c := 0
	for _, d := range n.Destinations {
		if d.Blocked > 0 {
			c++
		}
	}
	return c
}

// Domain is one name the session looked up.
type Domain struct {
	Name    string   `json:"name"`
	Lookups int      `json:"lookups"`
	RCodes  []string `json:"rcodes,omitempty"`
	Answers []string `json:"answers,omitempty"`
	Blocked bool     `json:"blocked,omitempty"`
	Seq     uint64   `json:"seq"`
}

// Destination is one address and port the session connected or sent to.
type Destination struct {
	Proto    string `json:"proto"`
	IP       string `json:"ip"`
	Port     uint16 `json:"port"`
	Domain   string `json:"domain,omitempty"`
	Connects int    `json:"connects"`
	Blocked  int    `json:"blocked"`
	Reason   string `json:"reason,omitempty"`
	BytesOut uint64 `json:"bytes_out"`
	BytesIn  uint64 `json:"bytes_in"`
	Seq      uint64 `json:"seq"`
}

// Files are the paths the session touched.
type Files struct {
	Paths []Path `json:"paths"`
	// Hidden counts the file events beneath package-manager caches left
	// out (none WithAll).
	Hidden int `json:"hidden"`
}

// Path is one path and what was done to it.
type Path struct {
	Path string `json:"path"`
	// To is a rename's new path or a link's target.
	To        string   `json:"to,omitempty"`
	Ops       []string `json:"ops"`
	Events    int      `json:"events"`
	Errnos    []string `json:"errnos,omitempty"`
	Sensitive bool     `json:"sensitive,omitempty"`
	Seq       uint64   `json:"seq"`
}

// Alert is an alert of the session: journaled, or derived from the
// package view (Derived).
type Alert struct {
	Seq    uint64    `json:"seq,omitempty"`
	TS     time.Time `json:"ts"`
	RuleID string    `json:"rule_id"`
	// Rule is the rule's name (WithRuleNames), else its id.
	Rule    string   `json:"rule"`
	Title   string   `json:"title"`
	Level   string   `json:"level"`
	Summary string   `json:"summary,omitempty"`
	Package string   `json:"package,omitempty"`
	Refs    []uint64 `json:"refs,omitempty"`
	Derived bool     `json:"derived,omitempty"`
}

// Ref is an event an alert names.
type Ref struct {
	Kind    string    `json:"kind"`
	TS      time.Time `json:"ts"`
	Summary string    `json:"summary"`
}

// Tool is one tool invocation or model call.
type Tool struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	Server     string    `json:"server,omitempty"`
	Status     string    `json:"status,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Input      string    `json:"input,omitempty"`
	Output     string    `json:"output,omitempty"`
	Sealed     bool      `json:"sealed,omitempty"`
}

// Span is a bar or mark of the SVG timeline: a process's run, or an
// instant (an alert, a limit hit, a blocked connection, a package).
type Span struct {
	Row        string
	Start, End time.Time
	Class      string
}

// Option configures New.
type Option func(*Builder)

// WithAll keeps the file events beneath package-manager caches.
func WithAll() Option { return func(b *Builder) { b.all = true } }

// WithRuleNames names the rules of the alerts: name returns a rule's name
// for its id (a Sigma rule's UUID), or "" for none; an alert whose rule
// has a name shows it (Alert.Rule), its id beside.
func WithRuleNames(name func(id string) string) Option { return func(b *Builder) { b.ruleName = name } }

// WithView passes options to the package view (pkgview.WithShimDir).
func WithView(opts ...pkgview.Option) Option {
	return func(b *Builder) { b.viewOpts = append(b.viewOpts, opts...) }
}

// Builder builds a Report from one session's events, added in journal
// order.
type Builder struct {
	r        *Report
	all      bool
	viewOpts []pkgview.Option
	ruleName func(string) string
	tl       *timeline.Builder
	refs     map[uint64]Ref // alert refs are resolved from these
	dests    map[string]*Destination
	domains  map[string]*Domain
	paths    map[string]*Path
	marks    []Span
	marksIn  map[string]int
	// links are the paths of the links the session made (at most
	// maxRows).
	links []string
	// marksOmitted counts the marks beyond maxRows in a row.
	marksOmitted int
}

// New starts the report of session id.
func New(id string, opts ...Option) *Builder {
	b := &Builder{r: &Report{SessionID: id, Facts: Facts{ByCategory: map[string]uint64{}}},
		refs: map[uint64]Ref{}, dests: map[string]*Destination{}, domains: map[string]*Domain{},
		paths: map[string]*Path{}, marksIn: map[string]int{}}
	for _, o := range opts {
		o(b)
	}
	b.tl = timeline.New(id, b.viewOpts...)
	b.r.all = b.all
	return b
}

// Add adds the session's event at seq.
func (b *Builder) Add(seq uint64, e *event.Event) {
	b.tl.Add(seq, e)
	b.r.Facts.ByCategory[e.Category()]++
	switch {
	case e.Session != nil:
		b.session(seq, e)
	case e.File != nil:
		b.file(seq, e)
	case e.Net != nil:
		b.net(seq, e)
	case e.Tool != nil || e.Model != nil:
		b.tool(seq, e)
	case e.Alert != nil:
		b.alert(seq, e)
	case e.Limit != nil:
		b.mark("limits", e.TS, "limit")
	case e.Pkg != nil:
		b.mark("packages", e.TS, "pkg")
	}
	if len(b.refs) < maxKept {
		b.refs[seq] = Ref{Kind: e.Kind, TS: e.TS, Summary: render.Summary(e)}
	}
}

// throughLink reports whether either path is a link the session made or
// beneath one: what a link in a cache leads to (~/.ssh, say) is never
// noise.
func (b *Builder) throughLink(paths ...string) bool {
	for _, l := range b.links {
		for _, p := range paths {
			if p == l || strings.HasPrefix(p, l+"/") {
				return true
			}
		}
	}
	return false
}

// mark adds an instant to the chart's row, up to maxRows per row (then
// counted in marks).
func (b *Builder) mark(row string, ts time.Time, class string) {
	if b.marksIn[row] >= maxRows {
		b.marksOmitted++
		return
	}
	b.marksIn[row]++
	b.marks = append(b.marks, Span{Row: row, Start: ts, Class: class})
}

// maxKept bounds the events a builder describes to resolve alert refs: an
// alert names earlier events, so the builder keeps a line for each of the
// session's first maxKept as they pass. A ref to another names the
// command that shows it.
const maxKept = 100_000

// maxRows bounds each list of the report (paths, destinations, names,
// tool calls) and each row of marks of its chart; what is left out is
// counted in Report.Omitted. Sensitive paths are kept first.
const maxRows = 2000

// session takes the session's facts from its lifecycle events.
func (b *Builder) session(seq uint64, e *event.Event) {
	s, f := e.Session, &b.r.Facts
	switch s.Op {
	case "create":
		f.User, f.Tenant, f.Host, f.Image, f.Limits = s.User, s.Tenant, s.Host, s.Image, s.Limits
	case "start":
		f.Start = e.TS
	case "terminate":
		f.End, f.Reason, f.ExitStatus = e.TS, s.Reason, s.ExitStatus
	case "cleanup":
		f.FSState = s.FSState
	}
	if f.Start.IsZero() && s.Op == "create" {
		f.Start = e.TS
	}
}

// file adds a file event to its path's row, unless it is noise.
func (b *Builder) file(seq uint64, e *event.Event) {
	fl := e.File
	n := int(max(fl.Count, 1))
	sensitive := pkgview.Sensitive(fl.Path) || pkgview.Sensitive(fl.NewPath) || pkgview.Sensitive(fl.Target)
	if fl.Op == "link" && len(b.links) < maxRows {
		b.links = append(b.links, strings.TrimSuffix(fl.Path, "/"))
	}
	if !b.all && !sensitive && ecosystem.Noise(fl.Op, fl.Path, fl.NewPath) && !b.throughLink(fl.Path, fl.NewPath) {
		b.r.Files.Hidden += n
		return
	}
	to := fl.NewPath
	if to == "" {
		to = fl.Target
	}
	key := fl.Path + "\x00" + to
	p := b.paths[key]
	if p == nil {
		p = &Path{Path: fl.Path, To: to, Seq: seq, Sensitive: sensitive}
		b.paths[key] = p
	}
	p.Events += n
	if !slices.Contains(p.Ops, fl.Op) {
		p.Ops = append(p.Ops, fl.Op)
	}
	if fl.Errno != "" && !slices.Contains(p.Errnos, fl.Errno) {
		p.Errnos = append(p.Errnos, fl.Errno)
	}
}

// net adds a connection or send to its destination's row, a lookup to
// its name's.
func (b *Builder) net(seq uint64, e *event.Event) {
	n := e.Net
	if n.DNS != nil {
		b.lookup(seq, n)
		return
	}
	if n.Proto == "unix" || n.DstIP == "" {
		return
	}
	key := n.Proto + " " + render.HostPort(n.DstIP, n.DstPort)
	d := b.dests[key]
	if d == nil {
		d = &Destination{Proto: n.Proto, IP: n.DstIP, Port: n.DstPort, Seq: seq}
		b.dests[key] = d
	}
	if d.Domain == "" {
		d.Domain = n.Domain
	}
	d.BytesOut += n.BytesOut
	d.BytesIn += n.BytesIn
	switch e.Kind {
	case event.KindNetConnect:
		d.Connects++
	case event.KindNetSend:
		d.Connects += int(max(n.Count, 1))
	}
	if n.Verdict == "blocked" {
		d.Blocked++
		d.Reason = n.Reason
		b.r.Network.Blocked++
		b.mark("network", e.TS, "blocked")
	}
}

// lookup adds a DNS lookup to its name's row.
func (b *Builder) lookup(seq uint64, n *event.Net) {
	q := n.DNS
	d := b.domains[q.Query]
	if d == nil {
		d = &Domain{Name: q.Query, Seq: seq}
		b.domains[q.Query] = d
	}
	d.Lookups++
	if q.RCode != "" && !slices.Contains(d.RCodes, q.RCode) {
		d.RCodes = append(d.RCodes, q.RCode)
	}
	for _, a := range q.Answers {
		if len(d.Answers) < 16 && !slices.Contains(d.Answers, a.Data) {
			d.Answers = append(d.Answers, a.Data)
		}
	}
	if n.Verdict == "blocked" && !d.Blocked {
		d.Blocked = true
		b.r.Network.BlockedNames++
	}
}

// tool adds a tool invocation or model call.
func (b *Builder) tool(seq uint64, e *event.Event) {
	t := Tool{Seq: seq, TS: e.TS, Kind: e.Kind}
	var io event.IO
	if e.Tool != nil {
		t.Name, t.Server, t.Status, t.DurationMS, io = e.Tool.Name, e.Tool.Server, e.Tool.Status, e.Tool.DurationMS, e.Tool.IO
	} else {
		t.Name, io = e.Model.Name, e.Model.IO
	}
	t.Input, t.Output, t.Sealed = io.InputSummary, io.OutputSummary, io.SealedRef != ""
	b.r.Tools = append(b.r.Tools, t)
	b.mark("tools", e.TS, "tool")
}

// alert adds a journaled alert.
func (b *Builder) alert(seq uint64, e *event.Event) {
	a := e.Alert
	b.r.Alerts = append(b.r.Alerts, Alert{Seq: seq, TS: e.TS, RuleID: a.RuleID, Title: a.Title, Level: a.Level,
		Summary: a.Summary, Package: a.Package, Refs: a.Refs})
	b.mark("alerts", e.TS, "alert")
}

// Report returns the report, its verification left for the caller to
// set.
func (b *Builder) Report() *Report {
	tl := b.tl.Timeline()
	r := b.r
	r.Timeline, r.Processes, r.Packages = tl, tl.Processes, tl.Packages
	r.Facts.Events, r.Facts.Lost = tl.Events, tl.Lost
	r.Scripts = map[uint64]string{}
	for _, p := range tl.Packages {
		for _, sp := range p.Processes {
			r.Scripts[sp.Seq] = p.Ecosystem + " " + p.Name + " " + p.Version
		}
	}
	for _, s := range tl.Steps {
		switch s.Kind {
		case event.KindLimitHit, event.KindLoss:
			r.Limits = append(r.Limits, s)
		case event.KindAlert:
		default:
			r.Lifecycle = append(r.Lifecycle, s)
		}
	}
	b.derivedAlerts(tl.DerivedAlerts)
	b.collect()
	return r
}

// derivedAlerts adds the package view's alerts that the record does not
// hold already.
func (b *Builder) derivedAlerts(derived []*event.Event) {
	for _, e := range derived {
		a := e.Alert
		dup := slices.ContainsFunc(b.r.Alerts, func(x Alert) bool { return x.RuleID == a.RuleID && x.Package == a.Package })
		if !dup {
			b.r.Alerts = append(b.r.Alerts, Alert{TS: e.TS, RuleID: a.RuleID, Title: a.Title, Level: a.Level,
				Summary: a.Summary, Package: a.Package, Refs: a.Refs, Derived: true})
		}
	}
}

// collect sorts the maps into the report's lists, resolves the alerts'
// refs and lays out the timeline.
func (b *Builder) collect() {
	r := b.r
	r.Network.Domains = sorted(b.domains, func(d *Domain) uint64 { return d.Seq })
	r.Network.Destinations = sorted(b.dests, func(d *Destination) uint64 { return d.Seq })
	r.Files.Paths = sorted(b.paths, func(p *Path) uint64 { return p.Seq })
	slices.SortStableFunc(r.Files.Paths, func(x, y Path) int { return cmp.Compare(x.interest(), y.interest()) })
	r.Omitted = map[string]int{}
	r.Files.Paths = bound(r, "files", r.Files.Paths)
	r.Network.Domains = bound(r, "names", r.Network.Domains)
	r.Network.Destinations = bound(r, "destinations", r.Network.Destinations)
	r.Tools = bound(r, "tools", r.Tools)
	if b.marksOmitted > 0 {
		r.Omitted["marks"] = b.marksOmitted
	}
	slices.SortStableFunc(r.Alerts, func(x, y Alert) int { return event.LevelRank(y.Level) - event.LevelRank(x.Level) })
	for i := range r.Alerts {
		a := &r.Alerts[i]
		if a.Rule = a.RuleID; b.ruleName != nil {
			if n := b.ruleName(a.RuleID); n != "" {
				a.Rule = n
			}
		}
	}
	r.Refs = map[uint64]Ref{}
	for _, a := range r.Alerts {
		for _, s := range a.Refs {
			if ref, ok := b.refs[s]; ok {
				r.Refs[s] = ref
			} else {
				r.Refs[s] = Ref{Summary: "not among the events this report kept: sandtrail prove " + strconv.FormatUint(s, 10) + " shows it"}
			}
		}
	}
	r.Spans = b.spans()
	if r.Alerts == nil {
		r.Alerts = []Alert{}
	}
	if r.Tools == nil {
		r.Tools = []Tool{}
	}
}

// interest orders paths for people: sensitive ones that succeeded, then
// sensitive ones that failed, then the rest.
func (p Path) interest() int {
	switch {
	case p.Sensitive && len(p.Errnos) == 0:
		return 0
	case p.Sensitive:
		return 1
	}
	return 2
}

// bound keeps the first maxRows of list, counting the rest in
// r.Omitted[name].
func bound[T any](r *Report, name string, list []T) []T {
	if len(list) <= maxRows {
		return list
	}
	r.Omitted[name] = len(list) - maxRows
	return list[:maxRows]
}

// sorted returns m's values in the order of key.
func sorted[T any](m map[string]*T, key func(*T) uint64) []T {
	out := make([]*T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y *T) int { return cmp.Compare(key(x), key(y)) })
	vals := make([]T, len(out))
	for i, v := range out {
		vals[i] = *v
	}
	return vals
}
