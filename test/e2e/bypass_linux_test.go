package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestMirrorSeesBypass: the mirror names the process behind each fetch
// (the kernel's record of its connect) and raises shim_bypass for a
// session's process with no live shim among its ancestors, whatever the
// manager: npm run by its absolute path fetches around its shim and is
// caught; the same npm through the shim is not.
func TestMirrorSeesBypass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `set -e
mkdir -p "$HOME/a" "$HOME/b"
cd "$HOME/a" && echo '{"name":"a","version":"1.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier left-pad@1.3.0 >npm.out 2>&1 || { cat npm.out; exit 3; }
cd "$HOME/b" && echo '{"name":"b","version":"1.0.0"}' >package.json
/usr/bin/npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0 >npm.out 2>&1 || { cat npm.out; exit 4; }
`
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	var mirrorAlerts []*event.Event
	fetchPid := map[string]int32{}
	for _, ev := range evs {
		switch {
		case ev.Kind == event.KindAlert && ev.Alert.RuleID == "shim_bypass" && strings.Contains(ev.Alert.Summary, "through the mirror"):
			mirrorAlerts = append(mirrorAlerts, ev)
		case ev.Kind == event.KindPkgFetch && ev.Source == event.SourceMirror && ev.Proc != nil:
			fetchPid[ev.Pkg.Name] = ev.Proc.Pid
		}
	}
	if fetchPid["left-pad"] == 0 || fetchPid["is-number"] == 0 {
		t.Fatalf("pkg.fetch names no process: left-pad %d, is-number %d", fetchPid["left-pad"], fetchPid["is-number"])
	}
	var caught bool
	for _, a := range mirrorAlerts {
		if strings.Contains(a.Alert.Summary, "left-pad") || a.Proc.Pid == fetchPid["left-pad"] {
			t.Errorf("the shimmed npm raised a mirror shim_bypass: %s", a.Alert.Summary)
		}
		if a.Proc.Pid == fetchPid["is-number"] {
			caught = true
		}
	}
	if !caught {
		t.Errorf("npm run by its path fetched is-number around its shim and no mirror shim_bypass names it (alerts: %d)", len(mirrorAlerts))
	}
	e.verify()
}

// bypassRecord is what a session's record says of bypasses: the
// shim_bypass alerts of the mirror (by the pid they name) and of the
// package view's kernel rules (by the pid of the process.exec or
// file.read their first ref is), and the pid behind each mirror fetch, by
// package name and version.
type bypassRecord struct {
	mirror, kernel map[int32][]string
	fetchPid       map[string]int32
	evs            []*event.Event
}

func bypassesOf(t *testing.T, evs []*event.Event) bypassRecord {
	t.Helper()
	b := bypassRecord{mirror: map[int32][]string{}, kernel: map[int32][]string{}, fetchPid: map[string]int32{}, evs: evs}
	bySeq := map[uint64]*event.Event{}
	for _, ev := range evs {
		bySeq[ev.Seq] = ev
	}
	for _, ev := range evs {
		switch {
		case ev.Kind == event.KindPkgFetch && ev.Source == event.SourceMirror && ev.Proc != nil:
			b.fetchPid[ev.Pkg.Name+"@"+ev.Pkg.Resolved] = ev.Proc.Pid
		case ev.Kind != event.KindAlert || ev.Alert.RuleID != "shim_bypass":
		case ev.Proc != nil && strings.Contains(ev.Alert.Summary, "through the mirror"):
			b.mirror[ev.Proc.Pid] = append(b.mirror[ev.Proc.Pid], ev.Alert.Summary)
		case len(ev.Alert.Refs) > 0 && bySeq[ev.Alert.Refs[0]] != nil && bySeq[ev.Alert.Refs[0]].Proc != nil:
			pid := bySeq[ev.Alert.Refs[0]].Proc.Pid
			b.kernel[pid] = append(b.kernel[pid], ev.Alert.Summary)
		default:
			t.Errorf("a shim_bypass alert names no process: %+v", *ev.Alert)
		}
	}
	return b
}

// check reports, for each case, whether the record's alerts of each kind
// name the process that fetched its package, and fails on any alert that
// names the shimmed control's process or no case's.
func (b bypassRecord) check(t *testing.T, control string, cases []bypassCase) {
	t.Helper()
	ctl := b.fetchPid[control]
	if ctl == 0 {
		t.Fatalf("no mirror fetch of the control %s names a process; fetches: %v", control, b.fetchPid)
	}
	if len(b.mirror[ctl]) > 0 || len(b.kernel[ctl]) > 0 {
		t.Errorf("the shimmed control's npm (pid %d) raised shim_bypass: %q %q", ctl, b.mirror[ctl], b.kernel[ctl])
	}
	want := map[int32]bool{}
	for _, c := range cases {
		pid := b.fetchPid[c.pkg]
		if c.pkg == "" {
			pid = b.execPid(c.argv)
		}
		if pid == 0 {
			t.Errorf("%s: no mirror fetch of %s (or exec of %q) names a process; fetches: %v", c.name, c.pkg, c.argv, b.fetchPid)
			continue
		}
		want[pid] = true
		if c.pkg != "" && len(b.mirror[pid]) != 1 {
			t.Errorf("%s: %d shim_bypass alerts of the mirror name pid %d, which fetched %s; want 1", c.name, len(b.mirror[pid]), pid, c.pkg)
		}
		if n := len(b.kernel[pid]); c.kernel && n != 1 {
			t.Errorf("%s: %d shim_bypass alerts from the kernel's record name pid %d, which fetched %s; want 1", c.name, n, pid, c.pkg)
		} else {
			t.Logf("%s: pid %d, kernel: %q", c.name, pid, b.kernel[pid])
		}
	}
	for _, m := range []map[int32][]string{b.mirror, b.kernel} {
		for pid, s := range m {
			if !want[pid] {
				t.Errorf("a shim_bypass names pid %d, which is no case's: %q", pid, s)
			}
		}
	}
}

// A bypassCase is one way around the shim: its package's fetch names the
// process, and kernel says whether the kernel's record must catch it too
// (not only the mirror). A case with no package fetches nothing: its
// process is the one execPid finds by argv, and only the kernel's record
// names it.
type bypassCase struct {
	name, pkg string
	kernel    bool
	argv      string
}

// execPid is the pid of the first process.exec of an executable named exe
// (its base name) with word among its arguments; argv is "EXE WORD".
func (b bypassRecord) execPid(argv string) int32 {
	exe, word, _ := strings.Cut(argv, " ")
	for _, ev := range b.evs {
		if ev.Kind == event.KindExec && ev.Proc != nil && filepath.Base(ev.Proc.Exe) == exe && slices.Contains(ev.Proc.Argv, word) {
			return ev.Proc.Pid
		}
	}
	return 0
}

// npmDir is where this machine's npm lives.
func npmDir(t *testing.T) string {
	t.Helper()
	cli, err := filepath.EvalSymlinks("/usr/bin/npm")
	if err != nil || !strings.HasSuffix(cli, "/bin/npm-cli.js") {
		t.Skipf("/usr/bin/npm is not npm-cli.js (%q, %v)", cli, err)
	}
	return strings.TrimSuffix(cli, "/bin/npm-cli.js")
}

// TestBypassNpmUnderOtherNames: npm started without its shim is a
// shim_bypass, from the kernel's record (what the kernel executed, and
// npm's own modules read) and from the mirror, however it is named: by its
// path, by its interpreter (node npm-cli.js), as a symlink of another name,
// and as a copy of its entry script (a wrapper of npm's lib/cli.js under
// another name), and through the dynamic loader (ld.so node npm-cli.js).
// A full copy of npm's directory, renamed, is caught by the
// mirror only (docs/packages.md). The same npm through its shim raises
// nothing.
func TestBypassNpmUnderOtherNames(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	e := newEnv(t)
	flags := "--no-audit --no-fund --no-update-notifier"
	script := fmt.Sprintf(`set -e
mkdir -p "$HOME/bin"
ln -s %[1]s/bin/npm-cli.js "$HOME/bin/mynpm"
printf '#!/usr/bin/env node\nrequire(%%s)(process)\n' "'%[1]s/lib/cli.js'" >"$HOME/bin/tool"
chmod +x "$HOME/bin/tool"
mkdir -p "$HOME/.tools" && cp -r %[1]s "$HOME/.tools/npm"
mv "$HOME/.tools/npm/bin/npm-cli.js" "$HOME/.tools/npm/bin/run.js"
inst() { d=$1; pkg=$2; shift 2; mkdir -p "$HOME/$d"; cd "$HOME/$d"; echo '{"name":"'$d'","version":"1.0.0"}' >package.json
  "$@" install %[2]s "$pkg" >npm.out 2>&1 || { cat npm.out; exit 3; }; }
inst control left-pad@1.3.0 npm
inst path is-number@7.0.0 /usr/bin/npm
inst interp isarray@2.0.5 node %[1]s/bin/npm-cli.js
inst symlink ms@2.1.3 "$HOME/bin/mynpm"
inst wrapper inherits@2.0.4 "$HOME/bin/tool"
inst vendored wrappy@1.0.2 node "$HOME/.tools/npm/bin/run.js"
inst loader is-plain-obj@1.1.0 %[3]s /usr/bin/node %[1]s/bin/npm-cli.js
`, dir, flags, dynamicLoader(t))
	r := e.run("--timeout", "6m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := bypassesOf(t, e.events(r.summary.SessionID))
	b.check(t, "left-pad@1.3.0", []bypassCase{
		{"by path", "is-number@7.0.0", true, ""},
		{"by interpreter", "isarray@2.0.5", true, ""},
		{"as a symlink named mynpm", "ms@2.1.3", true, ""},
		{"as a wrapper of lib/cli.js named tool", "inherits@2.0.4", true, ""},
		{"as a renamed copy of npm's directory", "wrappy@1.0.2", false, ""},
		{"through the dynamic loader", "is-plain-obj@1.1.0", true, ""},
	})
	e.verify()
}

// TestBypassPipUnderOtherNames: pip started without its shim is a
// shim_bypass from the kernel's record (pip's own CLI modules read by a
// process with no shim above it) and from the mirror: a copy of the pip
// script named mypip, and python3 -c importing pip's main. The shimmed pip
// raises nothing. (python3 -m pip is TestShimPip's.)
func TestBypassPipUnderOtherNames(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/pip"); err != nil {
		t.Skip("no /usr/bin/pip")
	}
	e, _, pol := pipEnv(t)
	opts := "--disable-pip-version-check --no-input --retries 0"
	script := fmt.Sprintf(`set -e
cd "$HOME" && mkdir -p bin && cp /usr/bin/pip bin/mypip
pip install %[1]s --target "$HOME/t0" fixture-pkg==1.0
"$HOME/bin/mypip" install %[1]s --target "$HOME/t1" fixture-pkg==2.0
python3 -c 'import sys; from pip._internal.cli.main import main; sys.argv[0] = "x"; sys.exit(main())' install %[1]s --target "$HOME/t2" fixture-dep
`, opts)
	r := e.run("--policy", pol, "--timeout", "5m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := bypassesOf(t, e.events(r.summary.SessionID))
	b.check(t, "fixture-pkg@1.0", []bypassCase{
		{"a copy of the pip script named mypip", "fixture-pkg@2.0", true, ""},
		{"python3 -c importing pip's main", "fixture-dep@0.1", true, ""},
	})
	e.verify()
}

// TestBypassCorepackPnpm: pnpm, which has no shim, run through corepack:
// corepack fetches pnpm itself through the mirror (COREPACK_NPM_REGISTRY,
// launch.MirrorEnv), and pnpm fetches what it adds; both are fetches with
// no shim above them, and corepack's run is a shim_bypass in the kernel's
// record, as `corepack pnpm`, as `corepack enable` (corepack runs package
// managers that have no shim: any run of it is one), as the pnpm that
// `corepack enable` links, and as a symlink of another name to corepack's
// pnpm (by corepack's module read).
func TestBypassCorepackPnpm(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/corepack"); err != nil {
		t.Skip("no corepack")
	}
	e := newEnv(t)
	// The registry as this machine reaches it serves no dist.signatures,
	// which corepack checks unless COREPACK_INTEGRITY_KEYS is 0 (the
	// mirror still checks each tarball's integrity); pnpm is pinned to a
	// release that runs on node alone, and c2's packageManager names it,
	// so that the pnpm corepack enable links runs it from the cache.
	script := `set -e
export COREPACK_ENABLE_DOWNLOAD_PROMPT=0 COREPACK_INTEGRITY_KEYS=0
mkdir -p "$HOME/bin" "$HOME/control" "$HOME/c1" "$HOME/c2"
cd "$HOME/control" && echo '{"name":"control","version":"1.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier left-pad@1.3.0 >npm.out 2>&1 || { cat npm.out; exit 3; }
cd "$HOME/c1" && echo '{"name":"c1","version":"1.0.0"}' >package.json
corepack pnpm@9.15.0 add is-odd@3.0.1 >pnpm.out 2>&1 || { cat pnpm.out; exit 4; }
corepack enable --install-directory "$HOME/bin" pnpm
cd "$HOME/c2" && echo '{"name":"c2","version":"1.0.0","packageManager":"pnpm@9.15.0"}' >package.json
"$HOME/bin/pnpm" add escape-string-regexp@4.0.0 >pnpm.out 2>&1 || { cat pnpm.out; exit 5; }
ln -s /usr/lib/node_modules/corepack/dist/pnpm.js "$HOME/bin/pp"
mkdir -p "$HOME/c3" && cd "$HOME/c3" && echo '{"name":"c3","version":"1.0.0","packageManager":"pnpm@9.15.0"}' >package.json
"$HOME/bin/pp" add ms@2.1.3 >pnpm.out 2>&1 || { cat pnpm.out; exit 6; }
`
	r := e.run("--timeout", "6m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := bypassesOf(t, e.events(r.summary.SessionID))
	var pnpm string
	for k := range b.fetchPid {
		if strings.HasPrefix(k, "pnpm@") {
			pnpm = k
		}
	}
	if pnpm == "" {
		keys := make([]string, 0, len(b.fetchPid))
		for k := range b.fetchPid {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("corepack's download of pnpm did not come through the mirror; fetches: %v", keys)
	}
	b.check(t, "left-pad@1.3.0", []bypassCase{
		{"corepack's fetch of pnpm", pnpm, true, ""},
		{"pnpm's fetch, under corepack pnpm", "is-odd@3.0.1", true, ""},
		{"corepack enable, which fetches nothing", "", true, "corepack enable"},
		{"pnpm's fetch, as the pnpm corepack enable linked", "escape-string-regexp@4.0.0", true, ""},
		{"pnpm's fetch, through a symlink to corepack's pnpm named pp", "ms@2.1.3", true, ""},
	})
	e.verify()
}

// dynamicLoader is the path of this machine's dynamic loader, which runs
// a program named in its argv.
func dynamicLoader(t *testing.T) string {
	t.Helper()
	for _, g := range []string{"/lib64/ld-linux-*.so.*", "/lib/ld-linux-*.so.*", "/lib/ld-musl-*.so.*"} {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0]
		}
	}
	t.Skip("no dynamic loader found")
	return ""
}
