package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
)

const pkgSRI = "sha512-H0D8ktokFpR1CXnubPWC8tXX0o4YM13gWrxU0FYOD1MChgxlK/CNVgJSql50IQVG82n7u86MEs/HlXsmUv6adQ=="

// packagesEvents is a record of three sessions: P installs through the
// shim (a postinstall reads .npmrc and connects out, one claim is a lie,
// one request is blocked), Q installs one pip package, R has no package
// events and is the newest.
func packagesEvents() []*event.Event {
	var evs []*event.Event
	mk := func(sess, kind string, src event.Source, f func(*event.Event)) {
		e := &event.Event{V: event.SchemaVersion, TS: queryT0.Add(time.Duration(len(evs)) * time.Second), SessionID: sess,
			Kind: kind, Source: src}
		f(e)
		evs = append(evs, e)
	}
	proc := func(sess, kind string, pid, ppid int32, exe, cwd string, argv ...string) {
		mk(sess, kind, event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: pid, PPid: ppid, Exe: exe, Cwd: cwd, Argv: argv}
		})
	}
	spawn := func(sess string, pid, ppid int32, exe, cwd string, argv ...string) {
		proc(sess, event.KindFork, pid, ppid, "", "")
		proc(sess, event.KindExec, pid, ppid, exe, cwd, argv...)
	}
	fetch := func(sess, eco, name, version, hash string) {
		mk(sess, event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
			e.Pkg = &event.Pkg{Ecosystem: eco, Name: name, Resolved: version, Hash: hash, Outcome: "served",
				Verified: event.Bool(true), SourceURL: "https://registry.example.invalid/" + name + "-" + version + ".tgz"}
		})
	}
	install := func(sess, eco, name, version, hash string, mgr int32) {
		mk(sess, event.KindPkgInstall, event.SourceShim, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 10, UID: event.U32(1000)}
			e.Pkg = &event.Pkg{Manager: "npm", Ecosystem: eco, Name: name, Requested: "^" + version, Resolved: version,
				Hash: hash, Direct: event.Bool(true), ManagerPid: mgr, SourceURL: "http://127.0.0.1:8480/" + name}
		})
	}
	spawn("P", 10, 1, "/usr/local/lib/sandtrail/shims/npm", "/w", "npm", "install", "evil", "lodash")
	spawn("P", 11, 10, "/usr/bin/npm", "/w", "npm", "install", "evil", "lodash")
	fetch("P", "npm", "evil", "1.0.0", pkgSRI)
	fetch("P", "npm", "lodash", "4.17.21", pkgSRI)
	spawn("P", 12, 11, "/bin/sh", "/w/node_modules/evil", "sh", "-c", "node install.js")
	mk("P", event.KindFileRead, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 12}
		e.File = &event.File{Op: "read", Path: "/home/agent/.npmrc"}
	})
	mk("P", event.KindNetConnect, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 12}
		e.Net = &event.Net{Op: "connect", Proto: "tcp", DstIP: "203.0.113.9", DstPort: 443, Domain: "exfil.example.invalid", Verdict: "allowed"}
	})
	install("P", "npm", "evil", "1.0.0", pkgSRI, 11)
	install("P", "npm", "lodash", "4.17.99", pkgSRI, 11)
	mk("P", event.KindPkgBlocked, event.SourceShim, func(e *event.Event) {
		e.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: "worse", Requested: "^1", Verdict: "block", Rule: "blocklist", Reason: "on the blocklist"}
	})
	spawn("Q", 20, 1, "/usr/local/lib/sandtrail/shims/pip", "/w", "pip", "install", "requests")
	fetch("Q", "pypi", "requests", "2.31.0", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
	install("Q", "pypi", "Requests", "2.31.0", "sha256:9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08", 21)
	spawn("R", 30, 1, "/bin/ls", "/w", "ls")
	return evs
}

func TestPackagesCLI(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, packagesEvents())
	run := func(args ...string) string {
		t.Helper()
		out, err := queryCLI(t, append([]string{"--data", data, "packages"}, args...)...)
		if err != nil {
			t.Fatalf("packages %q: %v", args, err)
		}
		return out
	}

	table := run("--session", "P")
	for _, want := range []string{
		"ECOSYSTEM  NAME", "evil", "shim+mirror", "yes", "sha512-H0D8ktokFpR1C…", "    refused by blocklist: on the blocklist",
		"    process 12 sh -c 'node install.js'  cwd=/w/node_modules/evil  (npm_lifecycle)",
		"    sensitive read /home/agent/.npmrc  pid 12",
		"    connect 203.0.113.9:443 (exfil.example.invalid) allowed  pid 12",
		"4.17.99", "shim_only", "shim_mirror_mismatch", "worse", "blocked",
		"alerts\n", "the shim says npm lodash@4.17.99 was installed; the mirror never served that version",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("packages --session P lacks %q:\n%s", want, table)
		}
	}

	var v pkgview.View
	if err := json.Unmarshal([]byte(run("--session", "P", "--format", "json")), &v); err != nil {
		t.Fatal(err)
	}
	// Two alerts: the claim of lodash@4.17.99, and evil's install script,
	// which read .npmrc and then connected out.
	if v.SessionID != "P" || len(v.Packages) != 4 || len(v.Alerts) != 2 {
		t.Fatalf("packages --format json = session %q, %d packages, %d alerts; want P, 4, 2", v.SessionID, len(v.Packages), len(v.Alerts))
	}
	byRule := map[string]*event.Alert{}
	for _, a := range v.Alerts {
		byRule[a.Alert.RuleID] = a.Alert
	}
	if a := byRule[pkgview.RuleCredentialExfil]; a == nil || a.Package != "pkg:npm/evil@1.0.0" {
		t.Errorf("packages json alerts = %v, want %s naming pkg:npm/evil@1.0.0", byRule, pkgview.RuleCredentialExfil)
	}
	// The seqs are the journal's: P's events come first.
	if p := v.Packages[0]; p.Name != "evil" || p.Seen != pkgview.SeenBoth || len(p.Seqs) != 2 || p.Seqs[0] != 4 || p.Seqs[1] != 10 ||
		len(p.Processes) != 1 || len(p.Files) != 1 || len(p.Connections) != 1 || p.Pid != 11 {
		t.Errorf("packages json evil = %+v", p)
	}
	if a := byRule[pkgview.RuleMismatch]; a == nil || len(a.Refs) != 2 || a.Refs[0] != 11 || a.Refs[1] != 5 {
		t.Errorf("packages json alert = %+v, want shim_mirror_mismatch refs [11 5]", a)
	}

	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct{ Name, Version string }
	}
	if err := json.Unmarshal([]byte(run("--session", "P", "--format", "cyclonedx")), &bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || len(bom.Components) != 3 {
		t.Errorf("packages --format cyclonedx = %+v, want evil, lodash 4.17.21 and 4.17.99", bom)
	}
	var inv struct {
		ClassUID int `json:"class_uid"`
		Metadata struct {
			CorrelationUID string `json:"correlation_uid"`
		} `json:"metadata"`
		SBOM struct {
			Components []struct{ Name, Version, Purl string } `json:"software_components"`
		} `json:"sbom"`
	}
	if err := json.Unmarshal([]byte(run("--session", "P", "--format", "ocsf")), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.ClassUID != 5020 || inv.Metadata.CorrelationUID != "P" || len(inv.SBOM.Components) != len(bom.Components) ||
		inv.SBOM.Components[0].Name != "evil" || inv.SBOM.Components[0].Purl != "pkg:npm/evil@1.0.0" {
		t.Errorf("packages --format ocsf = %+v, want Software Inventory Info of P with the BOM's %d packages", inv, len(bom.Components))
	}

	// Without --session: the newest session with pkg events, Q, not R.
	if out := run("--format", "json"); !strings.Contains(out, `"session_id": "Q"`) || !strings.Contains(out, `"name": "Requests"`) {
		t.Errorf("packages without --session = %s, want Q's", out)
	}
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--seen", "blocked"}, 1},
		{[]string{"--ecosystem", "pypi"}, 0},
		{[]string{"--name", "lodash"}, 2},
		{[]string{"--seen", "shim_only", "--name", "lodash"}, 1},
	} {
		var v pkgview.View
		if err := json.Unmarshal([]byte(run(append([]string{"--session", "P", "--format", "json"}, tt.args...)...)), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Packages) != tt.want {
			t.Errorf("packages %q = %d packages, want %d", tt.args, len(v.Packages), tt.want)
		}
	}
	if out := run("--session", "Q", "--format", "json", "--name", "requests"); !strings.Contains(out, `"seen": "shim+mirror"`) {
		t.Errorf("packages --name requests (PEP 503) = %s, want Requests joined", out)
	}
	for _, args := range [][]string{
		{"--session", "nope"}, {"--format", "xml"}, {"--ecosystem", "maven"}, {"--seen", "everywhere"},
	} {
		if _, err := queryCLI(t, append([]string{"--data", data, "packages"}, args...)...); err == nil {
			t.Errorf("packages %q: no error", args)
		}
	}
}
