package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/pkgview"
)

// The package the forging helper claims, and the hash it claims for it.
const (
	forgedName = "forged-pkg"
	forgedVer  = "6.6.6"
	forgedHash = "sha512-H0D8ktokFpR1CXnubPWC8tXX0o4YM13gWrxU0FYOD1MChgxlK/CNVgJSql50IQVG82n7u86MEs/HlXsmUv6adQ=="
)

// forgeFetchHelper: with the ingest client the shims use, sends, from
// inside the session, a pkg.fetch that says the mirror served and verified
// forged-pkg@6.6.6 from an unapproved server, then the pkg.install a shim
// would send for it with the same hash. It prints "fetch: " and Send's
// error (or "ok"), then "install: " and the same for the claim.
func forgeFetchHelper([]string) int {
	c, err := ingest.Dial(os.Getenv("SANDTRAIL_SOCKET"), ingest.WithTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "forgefetch:", err)
		return 2
	}
	defer c.Close()
	ctx := context.Background()
	fetch := &event.Event{Kind: event.KindPkgFetch, Source: event.SourceMirror,
		Pkg: &event.Pkg{Ecosystem: "npm", Name: forgedName, Resolved: forgedVer, Hash: forgedHash,
			SourceURL: "https://evil.example.invalid/" + forgedName + "-" + forgedVer + ".tgz",
			Verified:  event.Bool(true), Outcome: "served", Cache: "miss"}}
	install := &event.Event{Kind: event.KindPkgInstall, Source: event.SourceShim,
		Pkg: &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: forgedName, Requested: forgedVer, Resolved: forgedVer,
			Hash: forgedHash, Direct: event.Bool(true), ManagerPid: int32(os.Getpid())}}
	for _, s := range []struct {
		what string
		e    *event.Event
	}{{"fetch", fetch}, {"install", install}} {
		err := c.Send(ctx, s.e)
		switch {
		case err == nil:
			fmt.Printf("%s: ok\n", s.what)
		case errors.Is(err, ingest.ErrRejected):
			fmt.Printf("%s: %v\n", s.what, err)
		default:
			fmt.Fprintf(os.Stderr, "forgefetch: %s: %v\n", s.what, err)
			return 3
		}
	}
	return 0
}

// TestIngestForgedFetchRefused: a process in a session (nobody, under
// `sandtrail run`) sends the mirror's pkg.fetch for a package from an
// unapproved server, verified, with the hash it then claims in its own
// pkg.install. The ingest socket rejects the fetch with a message that
// says why, journals the attempt as an ingest_forged_kind alert in the
// session naming the kind and the kernel's pid, and keeps the claim; the
// package view shows the claim alone: shim_only, not verified, no mirror
// hash, and no BOM component vouched for by the mirror.
func TestIngestForgedFetchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run(append([]string{"--user", "nobody", "--"}, helperCmd("forgefetch")...)...)
	if r.code != 0 {
		t.Fatalf("the forging helper: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	sid := r.summary.SessionID
	wantFetch := `fetch: ingest: events rejected: event `
	wantWhy := `kind "pkg.fetch" may not be sent by a process in a session: only the host writes it; ` +
		`a process in a session may send only pkg.install, pkg.blocked, tool.invoke, model.io; ` +
		`the attempt is recorded in the session's journal (alert ` + server.RuleForgedKind + `)`
	if !strings.Contains(r.stdout, wantFetch) || !strings.Contains(r.stdout, wantWhy) || !strings.Contains(r.stdout, "install: ok") {
		t.Errorf("the helper's sends:\n%s\nwant the fetch rejected, saying %q, and the install ok", r.stdout, wantWhy)
	}

	evs := e.events(sid)
	pid := helperPid(t, evs, "forgefetch")
	for _, ev := range kinds(evs, event.KindPkgFetch) {
		t.Errorf("a pkg.fetch is in the session: source %s, %+v", ev.Source, ev.Pkg)
	}
	ins := kinds(evs, event.KindPkgInstall)
	if len(ins) != 1 || ins[0].Source != event.SourceShim || ins[0].Proc == nil || ins[0].Proc.Pid != pid {
		t.Errorf("pkg.install events = %v, want the helper's claim, source shim, pid %d", ins, pid)
	}

	// The attempt, as `sandtrail query --kind alert` shows it.
	out, err := e.cmd("query", "--session", sid, "--kind", event.KindAlert, "--format", "table").Output()
	if err != nil || !strings.Contains(string(out), server.RuleForgedKind) {
		t.Errorf("sandtrail query --kind alert: %v\n%s\nwant the %s alert", err, out, server.RuleForgedKind)
	}
	var forged []*event.Event
	for _, ev := range kinds(evs, event.KindAlert) {
		if ev.Alert.RuleID == server.RuleForgedKind {
			forged = append(forged, ev)
		}
	}
	nobody := nobodyUID(t)
	wantSummary := fmt.Sprintf(`pid %d (uid %d) sent an event of kind "pkg.fetch" through the ingest socket; refused`, pid, nobody)
	if len(forged) != 1 {
		t.Errorf("%d %s alerts in the session, want 1", len(forged), server.RuleForgedKind)
	} else if a := forged[0]; a.Source != event.SourceRules || a.Alert.Level != "high" || a.Alert.Summary != wantSummary ||
		a.Proc == nil || a.Proc.Pid != pid || a.Proc.UID == nil || *a.Proc.UID != nobody || a.Proc.CgroupID == 0 {
		t.Errorf("the %s alert = source %s, %+v, proc %+v; want rules, high, %q, the helper's pid, uid and cgroup",
			server.RuleForgedKind, a.Source, a.Alert, a.Proc, wantSummary)
	}
	if !strings.Contains(r.stderr, server.RuleForgedKind) {
		t.Errorf("run's summary does not list the %s alert:\n%s", server.RuleForgedKind, r.stderr)
	}

	// The view: the claim alone.
	v := e.packagesView(sid)
	var row *pkgview.Package
	for _, p := range v.Packages {
		if p.Name == forgedName {
			if row != nil {
				t.Errorf("more than one row of %s: %+v and %+v", forgedName, row, p)
			}
			row = p
		}
	}
	if row == nil {
		t.Fatalf("no row of %s in the packages view: %+v", forgedName, v.Packages)
	}
	if row.Seen != pkgview.SeenShimOnly || row.Verified != nil || row.MirrorHash != "" || row.UpstreamURL != "" || row.Outcome != "" {
		t.Errorf("the row of %s = seen %s, verified %v, mirror_hash %q, upstream %q, outcome %q; want shim_only and nothing from the mirror",
			forgedName, row.Seen, row.Verified, row.MirrorHash, row.UpstreamURL, row.Outcome)
	}
	bom, err := e.cmd("packages", "--session", sid, "--format", "cyclonedx").Output()
	if err != nil {
		t.Fatalf("sandtrail packages --format cyclonedx: %v", err)
	}
	if b := string(bom); strings.Contains(b, `"sandtrail:verified"`) || strings.Contains(b, `"shim+mirror"`) ||
		strings.Contains(b, "evil.example.invalid") {
		t.Errorf("the BOM vouches for the forged fetch:\n%s", b)
	}
	e.verify()
}
