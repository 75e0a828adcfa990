package pkgview

import (
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
)

// The rules. Each runs when an event that can make it match arrives, so
// that a Watcher, which sees one event at a time, raises what Build raises
// over the whole session: a claim is checked when the shim's pkg.install
// arrives and again at each later served pkg.fetch of the name.

// checkRow raises RuleMismatch, once per row, when the shim claims a
// package the mirror contradicts: it served the same version with another
// hash (every served fetch whose hash can be compared differs), it refused
// every fetch of that version, or it served the name only at other
// versions.
func (s *state) checkRow(r *row, e *event.Event) {
	if r.alerted || r.blocked || r.bundled || len(r.installs) == 0 || r.pkg.Version == "" {
		return
	}
	in := r.installs[0]
	var f fetchRef
	var why string
	switch {
	case len(r.served) > 0:
		i, ok := differing(r.installs, r.served)
		if !ok {
			return
		}
		in, f = i, r.served[0]
		why = fmt.Sprintf(" with hash %s; the mirror served that version with hash %s", shownHash(in.hash), shownHash(f.hash))
	case len(r.refused) > 0:
		f = r.refused[len(r.refused)-1]
		why = fmt.Sprintf("; the mirror refused every fetch of that version (%s) and served none", render.Clean(f.outcome, 32))
	default:
		last, ok := s.served[r.nameKey]
		if !ok {
			return
		}
		f = last
		why = fmt.Sprintf("; the mirror never served that version in this session, and served %s", render.Clean(f.version, 64))
	}
	r.alerted = true
	r.pkg.Alerts = append(r.pkg.Alerts, RuleMismatch)
	q := &r.pkg
	s.raise(alert(e, RuleMismatch, "shim's install differs from what the mirror served",
		fmt.Sprintf("the shim says %s %s@%s was installed%s", render.Clean(q.Ecosystem, 16), render.Clean(q.Name, 214),
			render.Clean(in.version, 64), why), in.seq, f.seq))
}

// checkVerified raises RuleUnverified, once per row, when the shim claims
// an installed package that no verified fetch of the mirror's in the
// session accounts for: no artifact the mirror served with verified true
// has a digest of the claim's hash, and no verified fetch of the row's
// version has a hash that cannot be compared with the claim's (a claim
// without a hash, or of another algorithm, is taken at its version). Whatever else the
// claim says, its package's bytes then did not come through the verifying
// mirror in this session: a direct upstream, a cache filled elsewhere, a
// file put in place. A claim of a local package (a file: source, npm's
// link to a workspace folder or a path) has no artifact and is exempt. A
// bundled copy is checked through its carrier (checkCarried).
func (s *state) checkVerified(r *row, e *event.Event) {
	p := e.Pkg
	if r.unverifiedAlerted || r.blocked || strings.HasPrefix(p.SourceURL, "file:") {
		return
	}
	if r.bundled {
		s.checkCarried(r, e)
		return
	}
	for _, d := range digests(p.Hash) {
		if s.verified[d] {
			return
		}
	}
	for _, f := range r.served {
		if _, comparable := compareHashes(p.Hash, f.hash); f.verified && !comparable {
			return
		}
	}
	s.raiseUnverified(r, e, fmt.Sprintf("the shim says %s %s@%s was installed (hash %s, from %s); the mirror served no verified artifact of it in this session",
		render.Clean(p.Ecosystem, 16), render.Clean(p.Name, 214), render.Clean(p.Resolved, 64), shownHash(p.Hash),
		render.Clean(p.SourceURL, 256)))
}

// raiseUnverified marks r's claim e unverified and raises RuleUnverified
// with summary, unless the kernel's read-back raised it for the package
// already.
func (s *state) raiseUnverified(r *row, e *event.Event, summary string) {
	p := e.Pkg
	r.unverifiedAlerted = true
	r.pkg.Alerts = append(r.pkg.Alerts, RuleUnverified)
	_, key := keys(p.Ecosystem, p.Name, p.Resolved)
	s.claimAlerted[r.nameKey], s.claimAlerted[key] = true, true
	if s.kernelAlerted[r.nameKey] || s.kernelAlerted[key] {
		return // the kernel's read-back raised it already
	}
	s.raise(alert(e, RuleUnverified, "installed package with no verified fetch", summary, e.Seq))
}

// checkCarried raises RuleUnverified, once per row, when the shim claims
// a bundled copy that no verified fetch of its carrier accounts for: the
// mirror served the package its bundled_in names verified in the session,
// its record of that fetch lists the copy's name in its bundles (what the
// carrier's metadata, whose digests the tarball matched, says the tarball
// carries), and the shim claimed that package at a path the copy is
// nested in (<carrier path>/node_modules/...). A copy's bytes are then
// the carrier artifact's, which the mirror checked; the row is verified.
// A fetch of the copy's own name and version is another artifact and
// counts for nothing here.
func (s *state) checkCarried(r *row, e *event.Event) {
	p := e.Pkg
	if c := s.carrierRow(p); c != nil && s.carrierBundles(c, p.Name) && nestedIn(p.Path, c.pkg.Paths) {
		r.pkg.Verified = event.Bool(true)
		return
	}
	s.raiseUnverified(r, e, fmt.Sprintf("the shim says %s %s@%s was installed at %s, bundled in %s; the mirror served no verified artifact of that carrier in this session that bundles it, or the shim claimed it at no path the copy is in",
		render.Clean(p.Ecosystem, 16), render.Clean(p.Name, 214), render.Clean(p.Resolved, 64), render.Clean(p.Path, 256),
		render.Clean(p.BundledIn, 256)))
}

// differing returns an install whose hash can be compared with every
// served fetch's and differs from each.
func differing(installs, served []fetchRef) (fetchRef, bool) {
	for _, in := range installs {
		ok := true
		for _, f := range served {
			if same, comparable := compareHashes(in.hash, f.hash); same || !comparable {
				ok = false
				break
			}
		}
		if ok {
			return in, true
		}
	}
	return fetchRef{}, false
}

// checkBypass raises RuleBypass when a process.exec runs a real package
// manager (m) in a process with no shim in its ancestry, once per process
// tree: the process and its descendants are marked.
func (s *state) checkBypass(p *proc, m manager, e *event.Event) {
	if m == 0 || !newBypass(p) {
		return
	}
	pr := e.Proc
	s.raise(alert(e, RuleBypass, "package manager ran without the shim",
		fmt.Sprintf("%s ran with no sandtrail shim above it: pid %d, exe %s, argv %s", managerNames[m], pr.Pid,
			render.Clean(pr.Exe, 256), render.ShellJoin(pr.Argv, 512)), e.Seq))
}

// newBypass reports whether p, running a package manager, is a bypass not
// yet alerted: no shim above it, not the host's, not in an alerted tree;
// it marks p's tree alerted.
func newBypass(p *proc) bool {
	if p.shim || p.viaShim || p.bypass || p.host {
		return false
	}
	p.bypass = true
	return true
}

// checkModuleRead raises RuleBypass when an interpreter with no shim in
// its ancestry reads a package manager's core module (managerModule): the
// kernel's record of what it opened, which no name of the script that
// started it changes. A process in a tree already alerted, or whose image
// is no interpreter of that manager (cp, grep, tar reading the file), is
// not alerted.
func (s *state) checkModuleRead(e *event.Event) {
	if e.Kind != event.KindFileRead || e.Proc == nil || e.File == nil {
		return
	}
	m := managerModule(e.File.Path)
	p := s.procs[e.Proc.Pid]
	if m == 0 || p == nil || p.interp&m == 0 || !newBypass(p) {
		return
	}
	s.raise(alert(e, RuleBypass, "package manager ran without the shim",
		fmt.Sprintf("%s ran with no sandtrail shim above it: pid %d (%s) read %s", managerNames[m], e.Proc.Pid,
			render.Clean(e.Proc.Comm, 16), render.Clean(e.File.Path, 256)), e.Seq))
}

// alert is an alert event about e, the event that made the rule match.
func alert(e *event.Event, rule, title, summary string, refs ...uint64) *event.Event {
	return &event.Event{V: event.SchemaVersion, TS: e.TS, SessionID: e.SessionID, Host: e.Host,
		Kind: event.KindAlert, Source: event.SourceRules,
		Alert: &event.Alert{RuleID: rule, Title: title, Level: "high", Refs: refs, Summary: summary}}
}

// shownHash is a hash as a message shows it: cleaned and cut, or "(none)".
func shownHash(h string) string {
	if h == "" {
		return "(none)"
	}
	return render.Clean(h, 40)
}
