package mirror

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// fetchEvent is the one conversion of a mirror record to its pkg.fetch
// event.
func fetchEvent(r *fetch.Record, host string, now time.Time) *event.Event {
	cacheState := "miss"
	if r.CacheHit {
		cacheState = "hit"
	}
	p := &event.Pkg{Ecosystem: r.Ecosystem, Name: r.Name, Resolved: r.Version, SourceURL: r.URL,
		Registry: r.Registry, Hash: r.Hash, Verified: event.Bool(r.Verified), Verdict: r.Verdict, Reason: r.Reason,
		Purl: r.Purl, Client: clientAddr(r.Client), Cache: cacheState, Outcome: r.Outcome,
		Rule: r.Rule, Bytes: r.Bytes, LatencyMS: r.Latency.Milliseconds(), MetadataStale: r.MetadataStale,
		Provenance: r.Provenance, ProvenanceLost: r.ProvenanceLost, InstallScripts: r.InstallScripts, Signature: r.Signature, Bundles: r.Bundles}
	if r.Outcome != fetch.Served {
		p.Cache = ""
	}
	if p.Purl == "" {
		p.Purl = purl.Of(r.Ecosystem, r.Name, r.Version)
	}
	redact(p)
	e := &event.Event{V: event.SchemaVersion, TS: now, SessionID: r.Client.SessionID, Host: host,
		Kind: event.KindPkgFetch, Source: event.SourceMirror, Pkg: p}
	if r.Client.Proc != nil {
		proc := *r.Client.Proc
		e.Proc = &proc
	}
	return e
}

// RuleBypass is the rule of the mirror's alert for a fetch by a session's
// process with no live shim among its ancestors (the package view raises
// the same rule from the kernel's exec records).
const RuleBypass = "shim_bypass"

// bypassEvent is the one conversion of a fetch around the shim to its
// alert: the process, and what it fetched.
func bypassEvent(r *fetch.Record, host string, now time.Time) *event.Event {
	p := r.Client.Proc
	summary := fmt.Sprintf("pid %d (%s) fetched %s %s through the mirror with no shim among its ancestors: a package manager run around its shim",
		p.Pid, render.Clean(p.Comm, 16), render.Clean(r.Ecosystem, 16), render.Clean(purl.Of(r.Ecosystem, r.Name, r.Version), 256))
	proc := *p
	return &event.Event{V: event.SchemaVersion, TS: now, SessionID: r.Client.SessionID, Host: host,
		Kind: event.KindAlert, Source: event.SourceRules, Proc: &proc,
		Alert: &event.Alert{RuleID: RuleBypass, Title: "a package manager fetched around its shim", Level: "high", Summary: summary}}
}

// filterEvent is the one conversion of a filtering record to its
// pkg.filter event.
func filterEvent(f *fetch.Filtered, host string, now time.Time) *event.Event {
	p := &event.Pkg{Ecosystem: f.Ecosystem, Name: f.Name, Registry: f.Registry, Client: clientAddr(f.Client),
		Purl: purl.Of(f.Ecosystem, f.Name, "")}
	for _, r := range f.Removed {
		p.Removed = append(p.Removed, event.PkgRemoval{Version: r.Version, Outcome: r.Outcome, Rule: r.Rule, Reason: r.Reason})
	}
	redact(p)
	return &event.Event{V: event.SchemaVersion, TS: now, SessionID: f.Client.SessionID, Host: host,
		Kind: event.KindPkgFilter, Source: event.SourceMirror, Pkg: p}
}

// redact masks the credentials in every field of a mirror event that may
// hold a URL: the upstream's userinfo (https://user:secret@host/) and
// token query parameters, in the artifact's URL and the registry's, and in
// the reasons, which may quote a URL. It is the one place the mirror
// redacts what it records; the ecosystems fill their records with the URLs
// as they fetch them.
func redact(p *event.Pkg) {
	p.SourceURL, p.Registry = redactedURLs.of(p.SourceURL), redactedURLs.of(p.Registry)
	p.Reason = redactedTexts.of(p.Reason)
	for i := range p.Removed {
		p.Removed[i].Reason = redactedTexts.of(p.Removed[i].Reason)
	}
}

// redactedURLs and redactedTexts remember event.RedactURL and event.Redact
// of what the mirror records over and over (the URLs of the artifacts it
// serves again, its registries, the policy's reasons), which run their
// patterns on each.
var (
	redactedURLs  = &redactions{redact: event.RedactURL}
	redactedTexts = &redactions{redact: event.Redact}
)

// redactions is a redaction, remembered, forgetting all past
// maxRedactions.
type redactions struct {
	redact func(string) string
	m      sync.Map
	n      atomic.Int64
}

const maxRedactions = 1 << 16

func (r *redactions) of(s string) string {
	if s == "" {
		return s
	}
	if v, ok := r.m.Load(s); ok {
		return v.(string)
	}
	v := r.redact(s)
	if r.n.Add(1) > maxRedactions {
		r.m.Clear()
		r.n.Store(0)
	}
	r.m.Store(s, v)
	return v
}

func clientAddr(c fetch.Client) string {
	if !c.Addr.IsValid() {
		return ""
	}
	return c.Addr.String()
}
