// Package indextest generates realistic, deterministic streams of events
// for the tests and benchmarks of the index: many sessions running side by
// side, mostly process, file and net events, some package installs, and one
// session.terminate per session with a spread of end reasons. The same
// Config and seed always give the same events.
//
// Most sessions touch only the common part of each list; a few suspect
// ones also touch the rare part, which is what incident questions ask
// about. Each session installs from its own small set of packages, as a
// project's lockfile would.
//
// The streams plant the look-alikes that a wrong index would confuse: paths
// that share a prefix with a sibling ("/etc/ssh" and "/etc/sshd"), domains
// that end like another ("badexample.com" and "www.example.com"), and
// versions on both sides of a range boundary.
package indextest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
)

// Config shapes a stream.
type Config struct {
	// Sessions is the number of sessions.
	Sessions int
	// PerSession is the number of events of each session, the
	// terminate included (at least 3).
	PerSession int
	// Concurrent is how many sessions run side by side (default 16).
	Concurrent int
	// Seed makes the stream; the same seed gives the same events.
	Seed uint64
	// Start is the time of the first event (default 2026-11-01 UTC).
	Start time.Time
	// Suspect is the share of sessions, in percent, that touch the rare
	// paths, domains and packages at all (default 2).
	Suspect int
}

// Paths are the file paths the sessions touch, the common ones first.
var Paths = []string{
	"/usr/lib/python3/dist-packages/site.py", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/etc/ld.so.cache",
	"/home/agent/work/main.py", "/home/agent/work/README.md", "/tmp/build/out.o", "/etc/passwd",
	"/home/agent/work/node_modules/lodash/lodash.js", "/proc/self/status", "/etc/resolv.conf",
	"/home/agent/.cache/pip/http/x", "/etc/hosts", "/usr/bin/python3", "/etc/sshd", "/etc/ssh_config",
	// rare: the ones an incident asks about
	"/etc/ssh/sshd_config", "/etc/ssh", "/home/agent/.ssh/id_rsa", "/home/agent/.ssh/known_hosts",
	"/etc/shadow", "/root/.aws/credentials",
}

// Domains are the names the sessions resolve and connect to.
var Domains = []string{
	"registry.npmjs.org", "pypi.org", "files.pythonhosted.org", "deb.debian.org", "github.com",
	"api.github.com", "example.com", "badexample.com", "static.crates.io",
	// rare
	"www.example.com", "a.b.example.com", "exfil.evil.example", "c2.evil.example",
}

// Pkg is one package version the sessions install.
type Pkg struct{ Ecosystem, Name, Version string }

// Pkgs are the package versions the sessions install.
var Pkgs = []Pkg{
	{resolver.NPM, "lodash", "4.17.21"}, {resolver.NPM, "express", "4.19.2"},
	{resolver.NPM, "@babel/core", "7.24.0"}, {resolver.NPM, "lodash", "4.17.20"},
	{resolver.NPM, "lodash", "4.17.19"}, {resolver.NPM, "lodash", "5.0.0"},
	{resolver.NPM, "lodash", "4.16.6"}, {resolver.PyPI, "requests", "2.31.0"},
	{resolver.PyPI, "typing_extensions", "4.12.2"}, {resolver.Deb, "curl", "7.88.1-10+deb12u5"},
	{resolver.Deb, "curl", "7.88.1-9"}, {resolver.Cargo, "serde", "1.0.200"},
	// rare
	{resolver.NPM, "event-stream", "3.3.6"}, {resolver.NPM, "ua-parser-js", "0.7.29"},
}

// Reasons are the end reasons, in proportion: most sessions end normally.
var Reasons = []string{
	"normal", "normal", "normal", "normal", "normal", "normal", "normal", "normal", "normal", "normal",
	"normal", "normal", "normal", "normal", "timeout", "timeout", "api", "signal", "oom", "policy_violation",
}

// SessionID returns the id of session i.
func SessionID(i int) string { return fmt.Sprintf("sess-%07d", i) }

// pick chooses from n items; the last third of a list is rare, and only
// suspect sessions pick from it, 10% of the time.
func pick(r *rand.Rand, n int, suspect bool) int {
	if !suspect || r.IntN(100) < 90 {
		return r.IntN(n - n/3)
	}
	return n - n/3 + r.IntN(n/3)
}

// Generate calls fn with each event of the stream in journal order (Seq set
// from 0). fn must not keep ev. It stops at fn's first error.
func Generate(c Config, fn func(ev *event.Event) error) error {
	if c.Concurrent <= 0 {
		c.Concurrent = 16
	}
	if c.PerSession < 3 {
		c.PerSession = 3
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	}
	r := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5eed))
	if c.Suspect <= 0 {
		c.Suspect = 2
	}
	type live struct {
		id      int
		left    int
		pid     int32
		suspect bool
		pkgs    [3]int
	}
	var active []*live
	nextSession := 0
	now := c.Start
	var seq uint64
	for nextSession < c.Sessions || len(active) > 0 {
		for len(active) < c.Concurrent && nextSession < c.Sessions {
			l := &live{id: nextSession, left: c.PerSession, pid: int32(1000 + r.IntN(30000)), suspect: r.IntN(100) < c.Suspect}
			for i := range l.pkgs {
				l.pkgs[i] = pick(r, len(Pkgs), l.suspect)
			}
			active = append(active, l)
			nextSession++
		}
		k := r.IntN(len(active))
		s := active[k]
		now = now.Add(time.Duration(1+r.IntN(2000)) * time.Microsecond)
		ev := &event.Event{V: event.SchemaVersion, Seq: seq, TS: now, SessionID: SessionID(s.id), Host: "bench", Source: event.SourceKernel}
		switch {
		case s.left == c.PerSession:
			ev.Kind, ev.Source = event.KindSessionStart, event.SourceSession
			ev.Session = &event.Session{Op: "start", Tenant: "t1", User: "agent", Image: "python:3.12"}
		case s.left == 1:
			ev.Kind, ev.Source = event.KindSessionTerminate, event.SourceSession
			exit := int32(0)
			reason := Reasons[r.IntN(len(Reasons))]
			if reason != "normal" {
				exit = 137
			}
			ev.Session = &event.Session{Op: "terminate", Reason: reason, ExitStatus: &exit, FSState: "deleted"}
		default:
			fill(r, ev, s.pid, s.suspect, s.pkgs)
		}
		s.left--
		if s.left == 0 {
			active[k] = active[len(active)-1]
			active = active[:len(active)-1]
		}
		if err := fn(ev); err != nil {
			return err
		}
		seq++
	}
	return nil
}

func fill(r *rand.Rand, ev *event.Event, pid int32, suspect bool, pkgs [3]int) {
	proc := &event.Proc{Pid: pid + int32(r.IntN(50)), PPid: pid, Comm: "python3", Exe: "/usr/bin/python3"}
	switch n := r.IntN(100); {
	case n < 40:
		ev.Kind = event.KindExec
		if n%4 == 0 {
			ev.Kind = event.KindExit
			proc.ExitCode = event.I32(0)
		} else {
			proc.Argv = []string{"python3", "-c", "import sys"}
			proc.Cwd = "/home/agent/work"
		}
		ev.Proc = proc
	case n < 75:
		p := Paths[pick(r, len(Paths), suspect)]
		op := []string{"read", "read", "read", "write", "create"}[r.IntN(5)]
		ev.Kind, ev.Proc = event.FileKind(op), proc
		ev.File = &event.File{Op: op, Path: p, Result: event.I64(3)}
		if r.IntN(200) == 0 {
			ev.Kind, ev.File.Op, ev.File.NewPath = event.KindFileRename, "rename", p+".bak"
		}
	case n < 95:
		d := Domains[pick(r, len(Domains), suspect)]
		ev.Proc = proc
		if n%2 == 0 {
			ev.Kind = event.KindNetDNS
			ev.Net = &event.Net{Op: "dns", Proto: "udp", DstIP: "10.0.0.2", DstPort: 53,
				DNS: &event.DNS{Query: d + ".", QType: "A", RCode: "NOERROR",
					Answers: []event.DNSAnswer{{Type: "A", Data: "93.184.216.34", TTL: 300}}}}
		} else {
			ev.Kind = event.KindNetConnect
			ev.Net = &event.Net{Op: "connect", Proto: "tcp", SrcIP: "10.0.0.5", SrcPort: uint16(30000 + r.IntN(30000)),
				DstIP: "93.184.216.34", DstPort: 443, Domain: d, Verdict: "allowed"}
		}
	case n < 99:
		p := Pkgs[pkgs[r.IntN(len(pkgs))]]
		ev.Kind, ev.Source = event.KindPkgInstall, event.SourceShim
		ev.Pkg = &event.Pkg{Manager: manager(p.Ecosystem), Ecosystem: p.Ecosystem, Name: p.Name, Requested: p.Version, Resolved: p.Version,
			Hash: "sha256:" + fmt.Sprintf("%064x", r.Uint64()), Direct: event.Bool(true)}
	default:
		ev.Kind, ev.Source = event.KindAlert, event.SourceRules
		ev.Alert = &event.Alert{RuleID: "sensitive-read", Title: "sensitive file read", Level: "high", Refs: []uint64{ev.Seq}}
	}
}

// manager is the package manager that installs packages of ecosystem eco.
func manager(eco string) string {
	e, err := resolver.Lookup(eco)
	if err != nil {
		return ""
	}
	return e.Manager()
}
