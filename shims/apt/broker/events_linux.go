package broker

import (
	"fmt"
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
	uid := p.UID
	return &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: p.Session, Host: b.cfg.Host, Kind: kind,
		Source: event.SourceShim, Proc: &event.Proc{Pid: p.Pid, UID: &uid}}
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

// emitInstalls writes one pkg.install per package the install put on disk,
// read from the result: each .deb the hook hashed (apt runs it with
// exactly the .debs it hands dpkg to unpack, so a package already there
// is never among them) whose package dpkg's status, read after apt-get
// has exited, has on disk at the hook's version and arch. A .deb that
// dpkg did not unpack (apt-get stopped, dpkg failed) is not claimed; one
// unpacked and not configured is, with dpkg's state as the reason. When
// the status cannot be read, every hashed .deb is claimed, with the
// reason saying so. The URL is --print-uris', joined on the file name.
func (b *Broker) emitInstalls(p peer, reqs []shims.Request, uris []apt.URI, out string, pid int32) {
	recs := b.hookRecords(out)
	if len(recs) == 0 {
		return
	}
	status, statusErr := b.readStatus()
	if statusErr != nil {
		b.log.Warn("reading dpkg's status failed: the hashed .debs are claimed unconfirmed", "error", statusErr)
	}
	byFile := map[string]apt.URI{}
	for _, u := range uris {
		byFile[u.File] = u
	}
	for _, rec := range recs {
		var reason string
		if statusErr != nil {
			reason = "dpkg's status could not be read to confirm the install"
		} else {
			st, ok := status[rec.Name+":"+rec.Arch]
			if !ok || !st.OnDisk() || st.Version != rec.Version {
				b.log.Info("a hashed .deb is not on disk after the install", "package", rec.Name, "version", rec.Version, "state", st.State)
				continue
			}
			if st.State != "installed" {
				reason = "dpkg's status after the install: " + st.State
			}
		}
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
			Purl: purl.Deb(rec.Name, rec.Version, rec.Arch), Reason: reason}
		if u.SHA256 != "" && u.SHA256 != rec.SHA256 {
			e.Pkg.Reason = "the .deb's hash differs from the archive index's " + u.SHA256
		}
		b.cfg.Emit(e)
	}
}

// hookRecords reads what the hook wrote to out: none when it never ran.
func (b *Broker) hookRecords(out string) []apt.HookRecord {
	f, err := os.Open(out)
	if err != nil {
		if !os.IsNotExist(err) {
			b.log.Warn("reading the hook output failed", "error", err)
		}
		return nil
	}
	defer f.Close()
	recs, err := apt.ReadHookRecords(f)
	if err != nil {
		b.log.Warn("reading the hook output failed", "error", err)
	}
	return recs
}

// readStatus reads dpkg's status file.
func (b *Broker) readStatus() (map[string]Installed, error) {
	f, err := os.Open(b.cfg.DpkgStatus)
	if err != nil {
		return nil, fmt.Errorf("opening dpkg's status: %w", err)
	}
	defer f.Close()
	return ReadStatus(f)
}
