package broker

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/resolver/purl"
	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt"
)

// base is an event of kind for peer p.
func (b *Broker) base(kind string, p peer) *event.Event {
	uid := p.cred.UID
	return &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: p.session, Host: b.cfg.Host, Kind: kind,
		Source: event.SourceShim, Proc: &event.Proc{Pid: p.cred.Pid, UID: &uid}}
}

// emitBlocked writes one pkg.blocked per request.
func (b *Broker) emitBlocked(p peer, reqs []shims.Request, rule, msg string) {
	for _, r := range reqs {
		e := b.base(event.KindPkgBlocked, p)
		direct := true
		e.Pkg = &event.Pkg{Manager: "apt", Ecosystem: ecosystem.Deb, Name: r.Name, Requested: r.Spec, Registry: r.Registry,
			Verdict: "block", Rule: rule, Reason: msg, Direct: &direct}
		b.cfg.Emit(e)
	}
}

// emitInstalls writes one pkg.install per .deb the hook hashed, with its
// URL from --print-uris (joined on the file name).
func (b *Broker) emitInstalls(p peer, reqs []shims.Request, uris []apt.URI, out string, pid int32) {
	f, err := os.Open(out)
	if err != nil {
		if !os.IsNotExist(err) {
			b.log.Warn("reading the hook output failed", "error", err)
		}
		return
	}
	defer f.Close()
	recs, err := apt.ReadHookRecords(f)
	if err != nil {
		b.log.Warn("reading the hook output failed", "error", err)
	}
	byFile := map[string]apt.URI{}
	for _, u := range uris {
		byFile[u.File] = u
	}
	for _, rec := range recs {
		e := b.base(event.KindPkgInstall, p)
		u := byFile[filepath.Base(rec.Deb)]
		direct, spec := false, ""
		for _, r := range reqs {
			if r.Name == rec.Name {
				direct, spec = true, r.Spec
				break
			}
		}
		e.Pkg = &event.Pkg{Manager: "apt", Ecosystem: ecosystem.Deb, Name: rec.Name, Resolved: rec.Version, SourceURL: u.URL,
			Hash: "sha256:" + rec.SHA256, Direct: &direct, Requested: spec, ManagerPid: pid,
			Purl: purl.Deb(rec.Name, rec.Version, rec.Arch)}
		if u.SHA256 != "" && u.SHA256 != rec.SHA256 {
			e.Pkg.Reason = "the .deb's hash differs from the archive index's " + u.SHA256
		}
		b.cfg.Emit(e)
	}
}
