package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// RuleForgedKind is the rule id of the alert the server journals when a
// process inside a session sends a kind that only the host writes (a
// pkg.fetch, an alert, a process.exec, ...): the attempt to forge the
// host's record, refused.
const RuleForgedKind = "ingest_forged_kind"

// peers is a set of the two sorts of peer that may send events: a process
// in a session, and root outside every session.
type peers uint8

const (
	// fromSession: any process in a session's cgroup or beneath it, whatever
	// its uid. Its events are marked source shim.
	fromSession peers = 1 << iota
	// fromOrchestrator: root outside every session. Its events are marked
	// source api.
	fromOrchestrator
)

// senders is the one list of the kinds a peer may send through the socket,
// and which peers may send each. Every other kind is the host's own to
// write, and is refused from every peer: process.*, file.*, net.*,
// session.*, limit.*, collector.*, journal.* and alert are the kernel's, the
// session manager's, the rules' and the journal's; pkg.fetch and pkg.filter
// are the mirror's, which it journals itself, never through the socket. A
// kind this list does not know is refused too: what a peer may claim is
// decided kind by kind, never by category.
var senders = []struct {
	kind string
	from peers
}{
	{event.KindPkgInstall, fromSession | fromOrchestrator}, // the shim's claim of what its manager installed
	{event.KindPkgBlocked, fromSession | fromOrchestrator}, // the shim's refusals
	{event.KindToolInvoke, fromSession | fromOrchestrator},
	{event.KindModelIO, fromSession | fromOrchestrator},
	// Root outside every session may relay the mirror's kinds; they are
	// marked api, and the package view believes only the mirror's own.
	{event.KindPkgFetch, fromOrchestrator},
	{event.KindPkgFilter, fromOrchestrator},
}

// from is the kind of peer a is.
func (a sender) from() peers {
	if a.session != "" {
		return fromSession
	}
	return fromOrchestrator
}

// permitted reports whether peer a may send an event of kind.
func (a sender) permitted(kind string) bool {
	for _, s := range senders {
		if s.kind == kind {
			return s.from&a.from() != 0
		}
	}
	return false
}

// permittedKinds lists the kinds peers of from may send, for messages.
func permittedKinds(from peers) []string {
	var out []string
	for _, s := range senders {
		if s.from&from != 0 {
			out = append(out, s.kind)
		}
	}
	return out
}

// kindError rejects an event whose kind its peer may not send. Its message
// is what the client prints.
type kindError struct {
	kind string
	from peers
}

func (e *kindError) Error() string {
	who := "root outside every session"
	if e.from == fromSession {
		who = "a process in a session"
	}
	why := "it is not a kind any peer may send"
	if slices.Contains(event.Kinds, e.kind) {
		why = "only the host writes it"
	}
	msg := fmt.Sprintf("kind %q may not be sent by %s: %s; %s may send only %s", event.Clip(e.kind, 64), who, why,
		who, strings.Join(permittedKinds(e.from), ", "))
	if e.from == fromSession {
		msg += "; the attempt is recorded in the session's journal (alert " + RuleForgedKind + ")"
	}
	return msg
}

// forgery is what a session's peer sent in one batch that it may not: the
// number of such events and their kinds, in order, without repeats, at most
// maxForgedKinds of them.
type forgery struct {
	n     int
	kinds []string
	more  bool // kinds beyond maxForgedKinds were left out
}

// maxForgedKinds bounds the kinds one alert names.
const maxForgedKinds = 8

func (f *forgery) add(kind string) {
	f.n++
	for _, k := range f.kinds {
		if k == kind {
			return
		}
	}
	if len(f.kinds) == maxForgedKinds {
		f.more = true
		return
	}
	f.kinds = append(f.kinds, kind)
}

// forgedAlert is the one conversion of a session peer's refused kinds to the
// alert that records them in its session: source rules, the peer's pid, uid
// and cgroup in proc, as the kernel gave them, and no refs, since the
// refused events are not journaled.
func (s *Server) forgedAlert(a sender, f *forgery, now time.Time) *event.Event {
	quoted := make([]string, len(f.kinds))
	for i, k := range f.kinds {
		quoted[i] = fmt.Sprintf("%q", event.Clip(k, 64))
	}
	kinds := strings.Join(quoted, ", ")
	if len(f.kinds) > 1 {
		kinds = "kinds " + kinds
	} else {
		kinds = "kind " + kinds
	}
	if f.more {
		kinds += " and others"
	}
	what := "an event of " + kinds
	if f.n > 1 {
		what = fmt.Sprintf("%d events of %s", f.n, kinds)
	}
	uid := a.uid
	return &event.Event{V: event.SchemaVersion, TS: now, SessionID: a.session, Host: s.host,
		Kind: event.KindAlert, Source: event.SourceRules,
		Proc: &event.Proc{Pid: a.pid, UID: &uid, CgroupID: a.cgroupID},
		Alert: &event.Alert{RuleID: RuleForgedKind, Title: "a process in the session sent a kind only the host writes",
			Level: "high", Summary: event.Redact(fmt.Sprintf("pid %d (uid %d) sent %s through the ingest socket; refused",
				a.pid, a.uid, what))}}
}
