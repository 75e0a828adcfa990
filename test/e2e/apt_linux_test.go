package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// aptJoinPkgs are what TestShimAptJoins installs, the dependency
// included: small real packages, figlet with a postinst (it runs
// update-alternatives) and cowsay with a dependency this machine lacks.
var aptJoinPkgs = []string{"figlet", "cowsay", "libtext-charwidth-perl"}

// dpkgStatus is each installed package's name:arch and version, by
// dpkg-query, read by the test as root.
func dpkgStatus(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${binary:Package} ${Architecture} ${Version}\n").Output()
	if err != nil {
		t.Fatalf("dpkg-query: %v", err)
	}
	st := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "ii" {
			name, _, _ := strings.Cut(f[1], ":")
			st[name+":"+f[2]] = f[3]
		}
	}
	return st
}

// TestShimAptJoins is the apt leg of the package join: the agent's
// `apt-get install -y figlet cowsay`, through the shim and the daemon's
// broker, against the real Debian archive through the mirror. Each package
// the command installed (and nothing already there) has one pkg.install
// with its version, arch and the purl the mirror writes, and is shim+mirror
// in `sandtrail packages`: the broker runs apt-get in a cgroup nested in
// the session's, so the mirror attributes apt's fetches to the session.
// dpkg and figlet's postinst are in the session's record, as root, beneath
// apt-get in its process tree, and the postinst's processes are under
// figlet's row. On the code before, apt ran outside the session: every row
// was shim_only and no dpkg was recorded.
func TestShimAptJoins(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("apt-get is not installed")
	}
	for _, p := range aptJoinPkgs {
		if exec.Command("dpkg", "-s", p).Run() == nil {
			t.Skipf("%s is installed already; the test installs and removes it", p)
		}
	}
	e := newEnv(t)
	t.Cleanup(func() {
		if out, err := exec.Command("apt-get", append([]string{"purge", "-y", "-qq"}, aptJoinPkgs...)...).CombinedOutput(); err != nil {
			t.Logf("removing %v: %v\n%s", aptJoinPkgs, err, out)
		}
	})
	before := dpkgStatus(t)
	r := e.run("--timeout", "5m", "--", "sh", "-c", "apt-get update -qq && apt-get install -y figlet cowsay && figlet -v && /usr/games/cowsay moo")
	if r.code != 0 || !strings.Contains(r.stdout, "moo") {
		t.Fatalf("apt-get install -y figlet cowsay as the agent: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	after := dpkgStatus(t)
	var added []string
	for k, v := range after {
		if before[k] != v {
			added = append(added, k+"="+v)
		}
	}
	slices.Sort(added)
	evs := e.events(r.summary.SessionID)

	// One pkg.install per package the command installed, spelled as the
	// mirror spells it.
	var claimed []string
	for _, in := range kinds(evs, event.KindPkgInstall) {
		p := in.Pkg
		arch := p.Purl[strings.LastIndex(p.Purl, "=")+1:]
		claimed = append(claimed, p.Name+":"+arch+"="+p.Resolved)
		if want := purl.Deb(p.Name, p.Resolved, arch); p.Purl != want || !strings.HasPrefix(p.Hash, "sha256:") || p.Manager != "apt" {
			t.Errorf("pkg.install %+v: want purl %s, a sha256, manager apt", p, want)
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, added) {
		t.Errorf("pkg.install events = %v, want what dpkg's status gained: %v", claimed, added)
	}

	// Each joins the mirror's verified fetch.
	v := e.packagesView(r.summary.SessionID)
	rows := map[string]*pkgview.Package{}
	for _, p := range v.Packages {
		rows[p.Name] = p
	}
	for _, name := range aptJoinPkgs {
		p := rows[name]
		switch {
		case p == nil:
			t.Errorf("no %s row in the packages view", name)
		case p.Seen != pkgview.SeenBoth || p.Verified == nil || !*p.Verified || p.Hash != p.MirrorHash:
			t.Errorf("%s: seen %s, verified %v, hash %s, mirror's %s; want shim+mirror, verified, one hash", name, p.Seen, p.Verified, p.Hash, p.MirrorHash)
		}
	}

	// dpkg and figlet's postinst, root processes of the session, beneath
	// apt-get.
	execs := map[int32]*event.Event{}
	parent := map[int32]int32{}
	for _, ev := range evs {
		if ev.Proc == nil {
			continue
		}
		switch ev.Kind {
		case event.KindExec:
			execs[ev.Proc.Pid] = ev
			if ev.Proc.PPid != 0 {
				parent[ev.Proc.Pid] = ev.Proc.PPid
			}
		case event.KindFork:
			if ev.Proc.PPid != 0 {
				parent[ev.Proc.Pid] = ev.Proc.PPid
			}
		}
	}
	underAptGet := func(pid int32) bool {
		for range 64 {
			if x := execs[pid]; x != nil && strings.HasSuffix(x.Proc.Exe, "/apt-get") {
				return true
			}
			pp, ok := parent[pid]
			if !ok {
				return false
			}
			pid = pp
		}
		return false
	}
	var dpkg, postinst *event.Event
	for _, x := range execs {
		root := x.Proc.UID != nil && *x.Proc.UID == 0
		switch {
		case x.Proc.Exe == "/usr/bin/dpkg" && root && underAptGet(x.Proc.Pid):
			dpkg = x
		case slices.ContainsFunc(append([]string{x.Proc.Exe}, x.Proc.Argv...), func(s string) bool {
			return strings.HasSuffix(s, "/var/lib/dpkg/info/figlet.postinst")
		}) && root && underAptGet(x.Proc.Pid):
			postinst = x
		}
	}
	if dpkg == nil || postinst == nil {
		t.Errorf("dpkg %v, figlet's postinst %v: want both in the session's record, as root, beneath apt-get", dpkg != nil, postinst != nil)
	}
	if p := rows["figlet"]; p != nil && !slices.ContainsFunc(p.Processes, func(pr pkgview.Process) bool { return pr.Match == pkgview.MatchDpkg }) {
		t.Errorf("figlet's row has no maintainer script process: %+v", p.Processes)
	}
	// The broker's apt-get is the host's, not a bypass; the daemon's live
	// rules and the mirror do not yet all know that (logged, not failed).
	for _, a := range kinds(evs, event.KindAlert) {
		if a.Alert != nil && a.Alert.RuleID == pkgview.RuleBypass {
			t.Logf("a shim_bypass alert in the record: %s", a.Alert.Summary)
		}
	}
	e.verify()
}
