package server

import (
	"context"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Checker decides a shim's checks with the host's policy: one verdict per
// check, in order. session is the peer's session ("" for root outside every
// session). It must not fail: where it cannot decide, it blocks and says
// why.
type Checker interface {
	Check(ctx context.Context, session string, checks []ingest.Check) []ingest.Verdict
}

// check answers a check request for peer a. Each block is recorded as a
// pkg.blocked event in the peer's session, attributed like the peer's own
// events, before the reply: a refusal the record cannot hold is answered
// unavailable, and the shim refuses unchecked.
func (s *Server) check(a sender, checks []ingest.Check) *ingest.Reply {
	if s.checker == nil {
		s.unavailable.Add(1)
		return &ingest.Reply{Code: ingest.CodeUnavailable, Error: "this server has no policy to check packages against"}
	}
	vs := s.checker.Check(s.appendCx, a.session, checks)
	if len(vs) != len(checks) {
		s.unavailable.Add(1)
		return &ingest.Reply{Code: ingest.CodeUnavailable, Error: "the policy did not answer every check"}
	}
	now := time.Now().UTC()
	var blocked []*event.Event
	for i, v := range vs {
		if v.Verdict == "block" {
			blocked = append(blocked, s.blockedEvent(a, checks[i], v, now))
		}
	}
	if len(blocked) > 0 {
		if err := s.app.Append(s.appendCx, blocked...); err != nil {
			s.failed.Add(uint64(len(blocked)))
			s.log.Error("appending to journal", "events", len(blocked), "error", err)
			return &ingest.Reply{Code: ingest.CodeUnavailable, Error: "recording the refusal failed"}
		}
		s.events.Add(uint64(len(blocked)))
	}
	return &ingest.Reply{Verdicts: vs}
}

// blockedEvent is the one conversion of a refused check to its pkg.blocked
// event.
func (s *Server) blockedEvent(a sender, c ingest.Check, v ingest.Verdict, now time.Time) *event.Event {
	uid := a.uid
	e := &event.Event{V: event.SchemaVersion, TS: now, SessionID: a.session, Host: s.host, Kind: event.KindPkgBlocked,
		Source: event.SourceShim, EventID: ingest.NewEventID(), Proc: &event.Proc{Pid: a.pid, UID: &uid, CgroupID: a.cgroupID},
		Pkg: &event.Pkg{Manager: c.Manager, Ecosystem: c.Ecosystem, Name: c.Name, Requested: c.Spec,
			SourceURL: event.RedactURL(c.Source), Registry: event.RedactURL(c.Registry),
			Verdict: v.Verdict, Rule: v.Rule, Reason: v.Reason}}
	if c.Name != "" {
		e.Pkg.Purl = purl.Of(c.Ecosystem, c.Name, c.Exact)
	}
	if a.session == "" {
		e.Source = event.SourceAPI
	}
	if e.Validate() != nil {
		// The peer's strings broke a bound (length, UTF-8): keep the
		// verdict, drop what it asked for.
		e.Pkg.Name, e.Pkg.Requested, e.Pkg.SourceURL, e.Pkg.Registry, e.Pkg.Purl = "", "", "", "", ""
	}
	return e
}
