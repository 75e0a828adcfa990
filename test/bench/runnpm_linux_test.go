package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/test/shimtest"
)

// The npm-in-a-session benchmark installs one fixed tree (testdata/npm150:
// express 4.18.2 and mocha 10.2.0, pinned by a committed package-lock.json,
// 146 packages on Linux) three ways, in a rotating order per round:
//
//   - session: `sandtrail run -- sh -c 'npm install …'`, the whole of it: the
//     session's start and end, the shim, the session's mirror (its cache
//     warm), the collector and the journal;
//   - direct: the same npm install with no session and no shim, against a
//     standalone `sandtrail mirror` with a warm cache (the same mirror code,
//     so the ratio measures what the session costs);
//   - fixed: `sandtrail run -- true` with the session's settings, what a
//     session costs whatever it runs.
//
// Every install starts from an empty node_modules and an empty npm cache.
// Both mirrors are warmed by one untimed install each (the only fetches from
// the registry; their metadata is kept for an hour, so the timed installs
// stay on loopback).

// runNpmTree is the fixture's directory, relative to test/bench.
const runNpmTree = "testdata/npm150"

// runNpmEnv is the environment of every sandtrail command here: both
// mirrors keep metadata past the benchmark's end, so that no timed install
// revalidates with the registry.
var runNpmEnv = []string{"SANDTRAIL_LOG_LEVEL=warn", "SANDTRAIL_MIRROR_META_TTL=1h"}

// runNpmScript installs the tree copied from tree into a new directory
// with a new npm cache and prints how long npm took (NPM_NS=), how many
// packages it installed (PACKAGES=) and the clock when it started and
// ended (START_NS=, END_NS=: in a session, what run spends before and
// after). registry is the mirror's npm URL; in a session it is
// "$SANDTRAIL_MIRROR/npm/", the session's mirror. npm's user
// config is tree's empty npmrc on both sides (the host's ~/.npmrc is not
// the session's; the shim reads the file, so it is not /dev/null).
//
// The lockfile's registry.npmjs.org URLs are rewritten to the mirror's
// first: npm's replace-registry-host keeps only the mirror's host and drops
// its /npm/ path (pacote: new URL(pathname, registry)), so npm 11 fetches
// /NAME/-/NAME-V.tgz, which the mirror does not serve.
func runNpmScript(tree, dir, registry string) string {
	return fmt.Sprintf(`echo START_NS=$(date +%%s%%N)
set -e; mkdir -p %[2]s && cd %[2]s && cp %[1]s/package.json %[1]s/package-lock.json .
reg="%[3]s"
sed -i "s#https://registry.npmjs.org/#$reg#g" package-lock.json
t0=$(date +%%s%%N)
npm install --no-audit --no-fund --no-update-notifier --userconfig %[1]s/npmrc --registry "$reg" --cache %[2]s/.npm >npm.out 2>&1 || { cat npm.out; exit 3; }
t1=$(date +%%s%%N)
echo NPM_NS=$((t1-t0))
echo PACKAGES=$(node -e 'console.log(Object.keys(require("./node_modules/.package-lock.json").packages).length)')
echo END_NS=$(date +%%s%%N)
`, tree, dir, registry)
}

// runNpmResult is one timed install: the whole command, npm alone, and
// the command's time before the script started and after it ended.
type runNpmResult struct{ wall, npm, before, after time.Duration }

// runNpmParse reads the result of a script that ran from start to end
// from its output, and checks the count of packages against want.
func runNpmParse(b *testing.B, what, out string, start, end time.Time, want int) runNpmResult {
	b.Helper()
	vals := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				vals[k] = n
			}
		}
	}
	if vals["NPM_NS"] <= 0 || vals["PACKAGES"] != int64(want) || vals["START_NS"] == 0 || vals["END_NS"] == 0 {
		b.Fatalf("%s: npm took %d ns and installed %d packages, want %d:\n%s", what, vals["NPM_NS"], vals["PACKAGES"], want, out)
	}
	return runNpmResult{wall: end.Sub(start), npm: time.Duration(vals["NPM_NS"]),
		before: time.Unix(0, vals["START_NS"]).Sub(start), after: end.Sub(time.Unix(0, vals["END_NS"]))}
}

// runNpmLockPackages is how many packages npm installs from the fixture's
// lockfile on Linux: all but the optional ones for another OS.
func runNpmLockPackages(b *testing.B) int {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(runNpmTree, "package-lock.json"))
	if err != nil {
		b.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Optional bool     `json:"optional"`
			OS       []string `json:"os"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		b.Fatalf("%s/package-lock.json: %v", runNpmTree, err)
	}
	n := 0
	for path, p := range lock.Packages {
		if path == "" || (p.Optional && len(p.OS) > 0 && !slices.Contains(p.OS, "linux")) {
			continue
		}
		n++
	}
	return n
}

// runNpmSession runs `sandtrail run -- sh -c script` on data and returns
// when it started and ended and its stdout; it fails unless CMD exited 0
// and the summary says the journal is intact.
func runNpmSession(b *testing.B, bin, data string, env []string, script string) (time.Time, time.Time, string) {
	b.Helper()
	cmd := exec.Command(bin, "--data", data, "run", "--format", "json", "--timeout", "5m", "--", "sh", "-c", script)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	end := time.Now()
	if err != nil {
		b.Fatalf("sandtrail run: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	i := strings.LastIndex(stderr.String(), "{\n  \"session_id\"")
	var sum struct {
		Journal struct {
			Status string `json:"status"`
		} `json:"journal"`
	}
	if i < 0 || json.Unmarshal([]byte(stderr.String()[i:]), &sum) != nil || sum.Journal.Status != "intact" {
		b.Fatalf("sandtrail run: no summary with an intact journal on stderr:\n%s", stderr.String())
	}
	return start, end, stdout.String()
}

// BenchmarkRunNpmInstall measures the npm install of the fixture's tree in a
// session against the same install through a standalone warm mirror with no
// session, and `sandtrail run -- true` as the session's fixed cost, in
// interleaved rounds (SANDTRAIL_BENCH_PAIRS, default 6), two ways:
//
//   - hosted: no daemon, so each `sandtrail run` hosts the session itself
//     (it loads the collector, starts the mirror and the journal, and
//     stops them at the end);
//   - daemon: a `sandtrail daemon` with its mirror enabled hosts every
//     session, so that a run pays none of that.
//
// Each reports the medians, the median per-round ratio session/direct with
// its quartiles (target: ≤ 1.10), npm's own time inside the session over
// the direct install's (x-npm-inside: what the shim, the collector and the
// session's mirror add to npm) and the ratio once each round's fixed cost
// is subtracted. Each iteration takes a few minutes: run it with
// -benchtime 1x (run.sh does).
func BenchmarkRunNpmInstall(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipping: sandtrail run needs root")
	}
	if _, err := user.Lookup("sandtrail-agent"); err != nil {
		b.Skip("skipping: needs the sandtrail-agent user (install.sh creates it)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		b.Skip("skipping: needs npm")
	}
	want := runNpmLockPackages(b)
	// Not b.TempDir: the agent must reach its workdir beneath the data
	// dir, and the fixture, and the test's temporary root is mode 0700.
	dir, err := os.MkdirTemp("", "sandtrail-bench-runnpm-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "sandtrail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		b.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	shims := filepath.Join(dir, "shims")
	if err := shimtest.Build(filepath.Join(dir, "sandtrail-shim")); err != nil {
		b.Fatal(err)
	}
	if err := shimtest.Link(filepath.Join(dir, "sandtrail-shim"), shims); err != nil {
		b.Fatal(err)
	}
	tree := runNpmCopyTree(b, dir)
	newData := func(name string) string {
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o711); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command(bin, "--data", data, "keys", "generate").CombinedOutput(); err != nil {
			b.Fatalf("sandtrail keys generate: %v\n%s", err, out)
		}
		return data
	}
	env := append(slices.Clone(os.Environ()), runNpmEnv...)

	addr := freePort(b)
	m := exec.Command(bin, "--data", newData("mirror"), "mirror", "--listen", addr)
	m.Env = env
	m.Stderr = os.Stderr
	reg := startServer(b, "sandtrail mirror", "http://"+addr+"/npm/", addr, m)
	round := 0
	direct := func() runNpmResult {
		round++
		work := filepath.Join(dir, "direct-"+strconv.Itoa(round))
		defer os.RemoveAll(work)
		cmd := exec.Command("sh", "-c", runNpmScript(tree, work, reg.url))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		end := time.Now()
		if err != nil {
			b.Fatalf("npm install through the standalone mirror: %v\n%s", err, out)
		}
		return runNpmParse(b, "npm install through the standalone mirror", string(out), start, end, want)
	}
	direct() // the warm-up: the standalone mirror fetches the tree

	// sessions runs the rounds with the sessions of data (env: the
	// environment of `sandtrail run`).
	sessions := func(b *testing.B, data string, env []string) {
		session := func() runNpmResult {
			start, end, out := runNpmSession(b, bin, data, env, runNpmScript(tree, "$HOME/p", "$SANDTRAIL_MIRROR/npm/"))
			return runNpmParse(b, "npm install in a session", out, start, end, want)
		}
		fixed := func() time.Duration {
			start, end, _ := runNpmSession(b, bin, data, env, "true")
			return end.Sub(start)
		}
		session() // the warm-up: the session's mirror fetches the tree
		fixed()
		var ses, dir1 []runNpmResult
		var fix []time.Duration
		b.ResetTimer()
		for range b.N {
			for r := range ioPairs(6) {
				steps := []func(){
					func() { ses = append(ses, session()) },
					func() { dir1 = append(dir1, direct()) },
					func() { fix = append(fix, fixed()) },
				}
				for k := range steps {
					steps[(r+k)%len(steps)]()
				}
			}
		}
		b.StopTimer()
		runNpmReport(b, ses, dir1, fix)
	}

	b.Run("hosted", func(b *testing.B) {
		data := newData("hosted")
		sessions(b, data, append(slices.Clone(env),
			"SANDTRAIL_SOCKET="+filepath.Join(data, "run", "ingest.sock"), "SANDTRAIL_SHIM_DIR="+shims))
	})
	b.Run("daemon", func(b *testing.B) {
		data := newData("daemon")
		sock, maddr := filepath.Join(data, "run", "ingest.sock"), freePort(b)
		denv := append(slices.Clone(env), "SANDTRAIL_SOCKET="+sock, "SANDTRAIL_SHIM_DIR="+shims,
			"SANDTRAIL_MIRROR_ENABLED=true", "SANDTRAIL_MIRROR_LISTEN="+maddr)
		d := exec.Command(bin, "--data", data, "daemon", "--socket", sock)
		d.Env = denv
		d.Stderr = os.Stderr
		startServer(b, "sandtrail daemon", "http://"+maddr+"/npm/", maddr, d)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(data, "run", "control.sock")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the daemon made no control socket")
			}
		}
		sessions(b, data, denv)
	})
}

// runNpmCopyTree copies the fixture into dir/tree, readable by the agent,
// with an empty npmrc beside it, and returns its path.
func runNpmCopyTree(b *testing.B, dir string) string {
	b.Helper()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		raw, err := os.ReadFile(filepath.Join(runNpmTree, f))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, f), raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tree, "npmrc"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return tree
}

// runNpmReport reports the rounds' medians and ratios.
func runNpmReport(b *testing.B, ses, direct []runNpmResult, fix []time.Duration) {
	b.Helper()
	split := func(rs []runNpmResult) (ws, ns, before, after []time.Duration) {
		for _, r := range rs {
			ws, ns = append(ws, r.wall), append(ns, r.npm)
			before, after = append(before, r.before), append(after, r.after)
		}
		return ws, ns, before, after
	}
	sw, sn, sb, sa := split(ses)
	dw, dn, _, _ := split(direct)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(medianDuration(sw)), "ms/install-session")
	b.ReportMetric(ms(medianDuration(dw)), "ms/install-direct")
	b.ReportMetric(ms(medianDuration(fix)), "ms/run-true")
	b.ReportMetric(ms(medianDuration(sn)), "ms/npm-inside-session")
	b.ReportMetric(ms(medianDuration(dn)), "ms/npm-direct")
	b.ReportMetric(ms(medianDuration(sb)), "ms/session-before-cmd")
	b.ReportMetric(ms(medianDuration(sa)), "ms/session-after-cmd")
	rs := collectorRatios(sw, dw)
	b.ReportMetric(median(rs), "x-session")
	b.ReportMetric(rs[len(rs)/4], "x-session-q1")
	b.ReportMetric(rs[(3*len(rs))/4], "x-session-q3")
	b.ReportMetric(collectorRatio(sn, dn), "x-npm-inside")
	net := make([]time.Duration, len(sw))
	for i := range sw {
		net[i] = sw[i] - fix[i]
	}
	b.ReportMetric(collectorRatio(net, dw), "x-session-less-fixed")
	b.Logf("per-round session/direct ratios, sorted: %.3f", rs)
	b.Logf("session ms %v; direct ms %v; run -- true ms %v", collectorMs(sw), collectorMs(dw), collectorMs(fix))
	b.Logf("npm inside the session ms %v; npm direct ms %v", collectorMs(sn), collectorMs(dn))
	b.Logf("session: ms before its command started %v, after it ended %v", collectorMs(sb), collectorMs(sa))
}
