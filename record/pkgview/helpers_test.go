package pkgview

import (
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// testShimDir is the shim directory of the tests' views (build and
// newWatcher pass it), as the configured shim_dir is the daemon's.
const testShimDir = "/opt/test/sandtrail/shims"

const shimNpm = testShimDir + "/npm"

// build is Build with the tests' shim directory; opts come after it.
func build(evs []*event.Event, opts ...Option) *View {
	return Build(evs, append([]Option{WithShimDir(testShimDir)}, opts...)...)
}

// newWatcher is NewWatcher with the tests' shim directory; opts come
// after it.
func newWatcher(opts ...Option) *Watcher {
	return NewWatcher(append([]Option{WithShimDir(testShimDir)}, opts...)...)
}

// rec builds one session's events in journal order, with seqs.
type rec struct {
	session string
	evs     []*event.Event
}

func newRec(session string) *rec { return &rec{session: session} }

func (r *rec) add(kind string, src event.Source, f func(*event.Event)) *event.Event {
	n := len(r.evs)
	e := &event.Event{V: event.SchemaVersion, Seq: uint64(n), TS: t0.Add(time.Duration(n) * time.Millisecond),
		SessionID: r.session, Kind: kind, Source: src}
	f(e)
	r.evs = append(r.evs, e)
	return e
}

func (r *rec) fork(pid, ppid int32) *event.Event {
	return r.add(event.KindFork, event.SourceKernel, func(e *event.Event) { e.Proc = &event.Proc{Pid: pid, PPid: ppid} })
}

func (r *rec) exec(pid, ppid int32, exe, cwd string, argv ...string) *event.Event {
	return r.add(event.KindExec, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid, PPid: ppid, Exe: exe, Cwd: cwd, Argv: argv, UID: event.U32(1000)}
	})
}

// spawn is a fork and an exec.
func (r *rec) spawn(pid, ppid int32, exe, cwd string, argv ...string) *event.Event {
	r.fork(pid, ppid)
	return r.exec(pid, ppid, exe, cwd, argv...)
}

func (r *rec) exit(pid int32) *event.Event {
	return r.add(event.KindExit, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid, ExitCode: event.I32(0)}
	})
}

func (r *rec) file(pid int32, op, path string) *event.Event {
	return r.add(event.FileKind(op), event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid}
		e.File = &event.File{Op: op, Path: path}
	})
}

func (r *rec) connect(pid int32, ip string, port uint16, domain string) *event.Event {
	return r.add(event.KindNetConnect, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid}
		e.Net = &event.Net{Op: "connect", Proto: "tcp", DstIP: ip, DstPort: port, Domain: domain, Verdict: "allowed"}
	})
}

func (r *rec) install(eco, name, version, hash string, managerPid int32) *event.Event {
	return r.add(event.KindPkgInstall, event.SourceShim, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 5, UID: event.U32(1000)}
		e.Pkg = &event.Pkg{Manager: "m", Ecosystem: eco, Name: name, Requested: "^" + version, Resolved: version,
			SourceURL: "http://127.0.0.1:8480/" + eco + "/" + name, Hash: hash, Direct: event.Bool(true), ManagerPid: managerPid}
	})
}

func (r *rec) fetch(eco, name, version, hash, outcome string) *event.Event {
	return r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
		e.Pkg = &event.Pkg{Ecosystem: eco, Name: name, Resolved: version, Hash: hash, Outcome: outcome,
			SourceURL: "https://registry.example.invalid/" + name + "-" + version, Verified: event.Bool(outcome == "served")}
	})
}

func (r *rec) blocked(eco, name, requested, rule string) *event.Event {
	return r.add(event.KindPkgBlocked, event.SourceShim, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 5}
		e.Pkg = &event.Pkg{Manager: "m", Ecosystem: eco, Name: name, Requested: requested, Verdict: "block",
			Rule: rule, Reason: "because " + rule}
	})
}

// Hashes of the tests: the same sha256 written three ways, another one,
// and SRI sha512s.
const (
	hexA   = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	hexB   = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	sriA   = "sha512-H0D8ktokFpR1CXnubPWC8tXX0o4YM13gWrxU0FYOD1MChgxlK/CNVgJSql50IQVG82n7u86MEs/HlXsmUv6adQ=="
	sriB   = "sha512-Umd2iCLuYk1I/OFexcp5y9YCy39MIVelFlVpkfIu+Me173sY0f9BxZNw77CFhlHUSpNsEbexRMSP4E3zxqPo2g=="
	shaA   = "sha256:" + hexA
	shaAUp = "SHA256:9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
	shaB   = "sha256:" + hexB
	// hexSriA is sriA in hex.
	hexSriA = "1f40fc92da241694750979ee6cf582f2d5d7d28e18335de05abc54d0560e0f5302860c652bf08d560252aa5e74210546f369fbbbce8c12cfc7957b2652fe9a75"
)

// bundling makes a mirror's fetch e list the packages its artifact
// bundles, and returns it.
func bundling(e *event.Event, names ...string) *event.Event {
	e.Pkg.Bundles = names
	return e
}
