package pkgview

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// The install-time behaviour rules: what a package's install scripts
// did, read from the kernel's record. A script is every process that
// descends from a process attribute found running a package's install
// or build script (npm lifecycle scripts, pip sdist builds, cargo build
// scripts, dpkg maintainer scripts); its alerts name that package
// (event.Alert.Package, a purl). Build and a Watcher run them through the
// same code, event by event, as the other rules. Tool names and flags are
// in tools.go, the path classes in these functions; docs/packages.md
// ("Install-time behaviour rules") says what each sees and what evades it.

// The rule ids of the install-time behaviour rules.
const (
	// RuleCredentialExfil: a script read a credential file (Sensitive)
	// and then connected out, to anything but the mirror.
	RuleCredentialExfil = "install_script_credential_exfil"
	// RuleAIAgentUnsafe: a script ran an AI agent's CLI with its
	// permission checks turned off (aiCLIs).
	RuleAIAgentUnsafe = "install_script_ai_agent_unsafe"
	// RulePersistence: a script wrote a file that runs later: a shell's
	// startup file, a git hook, a cron table or systemd unit, an AI
	// agent's configuration or instructions (persistenceOf).
	RulePersistence = "install_script_persistence"
	// RulePlantedRan: a file a script planted (RulePersistence) was run,
	// or read by a later process, such as a shell reading its startup
	// file.
	RulePlantedRan = "planted_file_ran"
	// RuleRawIPExec: a script connected to an address that no DNS answer
	// of the session named, and ran a file it wrote.
	RuleRawIPExec = "install_script_raw_ip_exec"
	// RulePthFile: pip installed a .pth file into a site-packages (code
	// that runs at every start of the interpreter).
	RulePthFile = "wheel_pth_file"
	// RulePublish: a script published a package, or tried to: the
	// mirror refused its publish (PublishRefusedRule), or it ran a
	// manager's publish command (publishCommand).
	RulePublish = "install_script_publish"
	// RuleSecretScanner: a script ran a credential scanner
	// (secretScanners).
	RuleSecretScanner = "install_script_secret_scanner"
)

// PublishRefusedRule is the rule of the mirror's record (a pkg.fetch with
// outcome blocked) of a publish it refused: a PUT, POST, PATCH or DELETE
// of its npm registry.
const PublishRefusedRule = "mirror.publish"

// Bounds of the behaviour rules' state.
const (
	maxWritten    = 1024    // files a script tree wrote, kept for RuleRawIPExec
	maxWrittenAll = 1 << 14 // those of every script tree of a Watcher's session
	maxPlanted    = 4096    // planted files per session
	maxResolved   = 1 << 16 // addresses DNS answered per session
	maxPth        = 1024    // .pth files waiting for their wheel's RECORD
	maxExited     = 256     // script processes remembered after their exit
	maxEarly      = 64      // refusals kept for processes the view has yet to see
)

// conduct is what one package's scripts did that the rules remember.
type conduct struct {
	cred, raw evidence
	wrote     map[string]uint64 // path → seq of a write
	raised    []string          // rule ids raised, once each (RulePersistence once per class)
}

// evidence is an event a rule remembers: its seq and what it says.
type evidence struct {
	seq  uint64
	what string
	ok   bool
}

// plant is a file a package's script wrote where it runs later.
type plant struct {
	pkg   string
	seq   uint64
	group *group
	ran   bool
}

// pthFile is a .pth written by a pip process, waiting for the RECORD of
// the wheel it belongs to.
type pthFile struct {
	seq  uint64
	path string
}

// scriptGroup is the package script group of the process of e, nil when
// it runs none or is the host's (the apt broker's dpkg, as root, runs the
// maintainer scripts of packages from the host's verified archive).
func (s *state) scriptGroup(e *event.Event) *group {
	if e.Proc == nil {
		return nil
	}
	if p := s.procs[e.Proc.Pid]; p != nil && !p.host {
		return p.group
	}
	return nil
}

// once reports whether rule (with class) is yet to be raised for g, and
// marks it raised.
func (g *group) once(rule string) bool {
	if slices.Contains(g.do.raised, rule) {
		return false
	}
	g.do.raised = append(g.do.raised, rule)
	return true
}

// packageOf is the purl of the package whose scripts g are: its row's,
// else its name's.
func (s *state) packageOf(g *group) string {
	if r := s.rowOf(g); r != nil {
		if r.pkg.Purl != "" {
			return r.pkg.Purl
		}
		return purl.Of(r.pkg.Ecosystem, r.pkg.Name, r.pkg.Version)
	}
	return purl.Of(g.eco, g.name, "")
}

// raiseFor raises rule about g's package, and marks its row.
func (s *state) raiseFor(g *group, e *event.Event, rule, title, summary string, refs ...uint64) {
	if r := s.rowOf(g); r != nil {
		r.pkg.Alerts = appendNew(r.pkg.Alerts, rule)
	} else {
		g.alerts = appendNew(g.alerts, rule)
	}
	s.raisePkg(e, rule, title, s.packageOf(g), summary, refs...)
}

// raisePkg raises rule about the package pkg (a purl, "" when unknown).
func (s *state) raisePkg(e *event.Event, rule, title, pkg, summary string, refs ...uint64) {
	a := alert(e, rule, title, summary, refs...)
	a.Alert.Level, a.Alert.Tags, a.Alert.Package = ruleLevels[rule], slices.Clone(ruleTags[rule]), pkg
	s.raise(a)
}

// ruleLevels and ruleTags are each behaviour rule's level and ATT&CK tags.
var (
	ruleLevels = map[string]string{RuleCredentialExfil: "critical", RuleAIAgentUnsafe: "high", RulePersistence: "high",
		RulePlantedRan: "high", RuleRawIPExec: "high", RulePthFile: "high", RulePublish: "critical", RuleSecretScanner: "high"}
	ruleTags = map[string][]string{
		RuleCredentialExfil: {"attack.credential_access", "attack.t1552.001", "attack.exfiltration", "attack.t1041"},
		RuleAIAgentUnsafe:   {"attack.execution", "attack.t1059"},
		RulePersistence:     {"attack.persistence", "attack.t1546.004", "attack.t1053.003", "attack.t1543.002"},
		RulePlantedRan:      {"attack.persistence", "attack.execution"},
		RuleRawIPExec:       {"attack.command_and_control", "attack.t1105", "attack.execution"},
		RulePthFile:         {"attack.persistence", "attack.t1546"},
		RulePublish:         {"attack.lateral_movement", "attack.t1195.002"},
		RuleSecretScanner:   {"attack.credential_access", "attack.t1552"},
	}
)

// appendNew appends s to list unless it holds it.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// conductFile runs the rules that read file events: a script's
// credential reads, its writes (kept for RuleRawIPExec, and checked for
// RulePersistence), a planted file read by a later process, and a .pth a
// pip process wrote.
func (s *state) conductFile(e *event.Event) {
	f := e.File
	if f == nil || f.Errno != "" || f.Dir || e.Proc == nil {
		return
	}
	g := s.scriptGroup(e)
	written := writtenPath(e)
	switch {
	case e.Kind == event.KindFileRead:
		if g != nil && !g.do.cred.ok && Sensitive(f.Path) {
			g.do.cred = evidence{seq: e.Seq, what: f.Path, ok: true}
		}
		s.checkPlantedRead(g, e)
	case written != "":
		if g != nil {
			s.scriptWrote(g, written, e)
		}
		s.pthWritten(written, e)
	}
	if e.Kind == event.KindFileCreate || e.Kind == event.KindFileRename {
		s.pthRecord(written, e)
	}
}

// writtenPath is the path a file event puts content at: a write's or a
// create's, a rename's new path, a link's new name; "" for others.
func writtenPath(e *event.Event) string {
	switch e.Kind {
	case event.KindFileWrite, event.KindFileCreate, event.KindFileLink:
		return e.File.Path
	case event.KindFileRename:
		return e.File.NewPath
	}
	return ""
}

// scriptWrote records a file g's script wrote and raises
// RulePersistence, once per class of file, when it is one that runs
// later; the file is then planted, for RulePlantedRan.
func (s *state) scriptWrote(g *group, p string, e *event.Event) {
	if g.do.wrote == nil {
		g.do.wrote = map[string]uint64{}
	}
	if _, ok := g.do.wrote[p]; !ok && len(g.do.wrote) < maxWritten {
		if s.live && s.nWritten >= maxWrittenAll {
			s.dropped++
		} else {
			g.do.wrote[p] = e.Seq
			s.nWritten++
		}
	}
	class := persistenceOf(p)
	if class == "" {
		return
	}
	pkg := s.packageOf(g)
	if _, ok := s.planted[p]; !ok && len(s.planted) < maxPlanted {
		s.planted[p] = &plant{pkg: pkg, seq: e.Seq, group: g}
	}
	if !g.once(RulePersistence + "\x00" + class) {
		return
	}
	s.raiseFor(g, e, RulePersistence, "install script wrote a file that runs later",
		fmt.Sprintf("%s, running an install script of %s, wrote %s (%s)", procName(e.Proc),
			render.Clean(pkg, 256), render.Clean(p, 256), class), e.Seq)
}

// The classes of files that run later (persistenceOf).
const (
	classShellRC   = "a shell's startup file"
	classGitHook   = "a git hook"
	classCron      = "a cron table"
	classService   = "a systemd unit or autostart entry"
	classAgentConf = "an AI agent's configuration or instructions"
)

// shellRCNames are the startup files shells read from a home directory.
var shellRCNames = map[string]bool{".bashrc": true, ".bash_profile": true, ".bash_login": true, ".bash_logout": true,
	".profile": true, ".zshrc": true, ".zshenv": true, ".zprofile": true, ".zlogin": true, ".kshrc": true,
	".mkshrc": true, ".cshrc": true, ".tcshrc": true, ".inputrc": true}

// agentFiles are the file names AI coding agents read as configuration
// or instructions wherever a project has them.
var agentFiles = map[string]bool{"CLAUDE.md": true, "CLAUDE.local.md": true, "AGENTS.md": true, "GEMINI.md": true,
	".mcp.json": true, ".claude.json": true, ".cursorrules": true, ".windsurfrules": true, ".clinerules": true,
	"copilot-instructions.md": true}

// agentDirs are the directories of AI coding agents' configuration, in a
// home or a project; agentDirFiles the files of editors' directories
// that run commands or name MCP servers.
var (
	agentDirs = []string{"/.claude/", "/.codex/", "/.gemini/", "/.cursor/", "/.continue/", "/.amazonq/", "/.aws/amazonq/",
		"/.kiro/", "/.windsurf/", "/.copilot/", "/.config/opencode/", "/.config/goose/", "/.qwen/"}
	agentDirFiles = []string{"/.vscode/tasks.json", "/.vscode/settings.json", "/.vscode/mcp.json", "/.zed/settings.json"}
)

// persistenceOf says which class of files that run later p is, "" for
// none. A path beneath a node_modules directory is a package's own files
// (a tarball's AGENTS.md), never one.
func persistenceOf(p string) string {
	if p == "" || strings.Contains(p, "/node_modules/") {
		return ""
	}
	base := path.Base(p)
	switch {
	case shellRCNames[base] || p == "/etc/profile" || p == "/etc/bash.bashrc" || p == "/etc/environment" ||
		strings.HasPrefix(p, "/etc/profile.d/") || strings.HasPrefix(p, "/etc/zsh/") ||
		strings.HasSuffix(p, "/.config/fish/config.fish") || strings.Contains(p, "/.config/fish/conf.d/"):
		return classShellRC
	case strings.Contains(p, "/.git/hooks/") && !strings.HasSuffix(p, ".sample"):
		return classGitHook
	case strings.HasPrefix(p, "/etc/cron") || strings.HasPrefix(p, "/var/spool/cron/") || p == "/etc/anacrontab":
		return classCron
	case strings.Contains(p, "/.config/systemd/user/") || strings.HasPrefix(p, "/etc/systemd/") ||
		strings.HasPrefix(p, "/lib/systemd/") || strings.HasPrefix(p, "/usr/lib/systemd/") ||
		strings.HasPrefix(p, "/run/systemd/") || strings.Contains(p, "/.config/autostart/") || strings.HasPrefix(p, "/etc/xdg/autostart/"):
		return classService
	case agentFiles[base]:
		return classAgentConf
	}
	for _, d := range agentDirs {
		if strings.Contains(p, d) {
			return classAgentConf
		}
	}
	for _, f := range agentDirFiles {
		if strings.HasSuffix(p, f) {
			return classAgentConf
		}
	}
	return ""
}

// checkPlantedRead raises RulePlantedRan when a process that is not the
// planting script's reads a planted file: a shell reading a startup file
// a package wrote (reads are in the record only where the policy's
// files.sensitive_read asks for them).
func (s *state) checkPlantedRead(g *group, e *event.Event) {
	pl := s.planted[e.File.Path]
	if pl == nil || pl.ran || g == pl.group {
		return
	}
	pl.ran = true
	s.raisePkg(e, RulePlantedRan, "a file an install script planted was used", pl.pkg,
		fmt.Sprintf("%s read %s, which %s's install script wrote", procName(e.Proc),
			render.Clean(e.File.Path, 256), render.Clean(pl.pkg, 256)), pl.seq, e.Seq)
}

// conductExec runs the rules that read a process.exec: a planted file
// run, and, for a script's process, an AI agent's CLI with its checks
// off, a credential scanner, a publish command, and a file it wrote run
// after a connection to a raw address.
func (s *state) conductExec(e *event.Event) {
	pr := e.Proc
	if pr == nil {
		return
	}
	if len(s.planted) > 0 {
		s.checkPlantedExec(execFiles(pr), e)
	}
	g := s.scriptGroup(e)
	if g == nil {
		return
	}
	names := namesOf(pr.Exe, pr.Argv)
	if cli, flag, ok := aiUnsafe(names, pr.Argv); ok && g.once(RuleAIAgentUnsafe) {
		s.raiseFor(g, e, RuleAIAgentUnsafe, "install script ran an AI agent with its permission checks off",
			fmt.Sprintf("an install script of %s ran %s with %s: pid %d, argv %s", render.Clean(s.packageOf(g), 256), cli,
				render.Clean(flag, 64), pr.Pid, render.ShellJoin(pr.Argv, 512)), e.Seq)
	}
	if tool, ok := secretScanner(names); ok && g.once(RuleSecretScanner) {
		s.raiseFor(g, e, RuleSecretScanner, "install script ran a credential scanner",
			fmt.Sprintf("an install script of %s ran %s: pid %d, argv %s", render.Clean(s.packageOf(g), 256), tool, pr.Pid,
				render.ShellJoin(pr.Argv, 512)), e.Seq)
	}
	if cmd, ok := publishCommand(names, pr.Argv); ok && g.once(RulePublish) {
		s.raiseFor(g, e, RulePublish, "install script published a package",
			fmt.Sprintf("an install script of %s ran %s: pid %d, argv %s", render.Clean(s.packageOf(g), 256), cmd, pr.Pid,
				render.ShellJoin(pr.Argv, 512)), e.Seq)
	}
	if g.do.raw.ok {
		s.checkRawExec(g, execFiles(pr), e)
	}
}

// checkRawExec raises RuleRawIPExec when g's script runs a file it wrote
// after it connected to an address no DNS answer named.
func (s *state) checkRawExec(g *group, files []string, e *event.Event) {
	for _, f := range files {
		w, ok := g.do.wrote[f]
		if !ok || !g.once(RuleRawIPExec) {
			continue
		}
		s.raiseFor(g, e, RuleRawIPExec, "install script ran a file it wrote after connecting to a raw address",
			fmt.Sprintf("an install script of %s connected to %s, which no DNS answer of the session named, and ran %s, which it wrote: pid %d",
				render.Clean(s.packageOf(g), 256), g.do.raw.what, render.Clean(f, 256), e.Proc.Pid), g.do.raw.seq, w, e.Seq)
		return
	}
}

// checkPlantedExec raises RulePlantedRan when an exec runs a planted
// file: its executable, or a script it names.
func (s *state) checkPlantedExec(files []string, e *event.Event) {
	for _, f := range files {
		pl := s.planted[f]
		if pl == nil || pl.ran {
			continue
		}
		pl.ran = true
		s.raisePkg(e, RulePlantedRan, "a file an install script planted was run", pl.pkg,
			fmt.Sprintf("pid %d ran %s, which %s's install script wrote: argv %s", e.Proc.Pid, render.Clean(f, 256),
				render.Clean(pl.pkg, 256), render.ShellJoin(e.Proc.Argv, 512)), pl.seq, e.Seq)
	}
}

// execFiles are the files an exec runs: the file the kernel executed
// (exe_path), the executable as named (against the cwd) and, when that is
// an interpreter (launchers), its first argument that is no option, the
// script it runs. Another program's arguments (chmod +x FILE) run nothing.
func execFiles(pr *event.Proc) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if !path.IsAbs(p) {
			if pr.Cwd == "" {
				return
			}
			p = path.Join(pr.Cwd, p)
		}
		out = append(out, path.Clean(p))
	}
	add(strings.TrimSuffix(pr.ExePath, " (deleted)"))
	add(pr.Exe)
	if !interpreter(pr.Exe, pr.Argv) {
		return out
	}
	for _, a := range pr.Argv[min(1, len(pr.Argv)):] {
		if a != "" && !strings.HasPrefix(a, "-") {
			add(a)
			break
		}
	}
	return out
}

// conductConn runs the rules that read a connection of a script:
// RuleCredentialExfil after a credential read, and the raw address
// RuleRawIPExec waits on. Connections to the mirror, over unix sockets
// and to port 53 (which goes to the session's DNS proxy) are no one's
// way out. Outside scripts it learns the mirror's address (learnDst).
func (s *state) conductConn(e *event.Event) {
	n := e.Net
	if n == nil || e.Proc == nil || n.Proto == "unix" || n.DstIP == "" {
		return
	}
	dst := endpoint{n.DstIP, n.DstPort}
	g := s.scriptGroup(e)
	if g == nil {
		s.learnDst(e.Proc.Pid, dst)
		return
	}
	if n.DstPort == 53 || s.mirrors[dst] || s.o.mirrors[dst] {
		return
	}
	if g.do.cred.ok && g.once(RuleCredentialExfil) {
		shown := dst.String()
		if n.Domain != "" {
			shown += " (" + render.Clean(n.Domain, 100) + ")"
		}
		s.raiseFor(g, e, RuleCredentialExfil, "install script read credentials and connected out",
			fmt.Sprintf("an install script of %s read %s and then connected to %s: %s", render.Clean(s.packageOf(g), 256),
				render.Clean(g.do.cred.what, 256), shown, procName(e.Proc)), g.do.cred.seq, e.Seq)
	}
	if !g.do.raw.ok && n.Domain == "" && !s.resolved[n.DstIP] {
		g.do.raw = evidence{seq: e.Seq, what: dst.String(), ok: true}
	}
}

// endpoint is a connection's destination: address and port.
type endpoint struct {
	ip   string
	port uint16
}

// String writes e as render.HostPort does.
func (e endpoint) String() string { return render.Clean(render.HostPort(e.ip, e.port), 64) }

// learnDst keeps the latest destination of a process that runs no
// script, which a mirror's fetch by it then names as the mirror's
// address (learnMirror).
func (s *state) learnDst(pid int32, dst endpoint) {
	if _, ok := s.lastDst[pid]; ok || !s.live || len(s.lastDst) < maxProcs {
		s.lastDst[pid] = dst
	}
}

// learnMirror takes the mirror's record of a fetch by a session's process
// that runs no script: the address that process connected to last is the
// mirror's.
func (s *state) learnMirror(e *event.Event) {
	if e.Proc == nil || s.scriptGroup(e) != nil {
		return
	}
	if d, ok := s.lastDst[e.Proc.Pid]; ok && (!s.live || len(s.mirrors) < maxRows) {
		s.mirrors[d] = true
	}
}

// learnAnswers keeps the addresses a net.dns answer named.
func (s *state) learnAnswers(e *event.Event) {
	if e.Net == nil || e.Net.DNS == nil {
		return
	}
	for _, a := range e.Net.DNS.Answers {
		if (a.Type == "A" || a.Type == "AAAA") && len(s.resolved) < maxResolved {
			s.resolved[a.Data] = true
		}
	}
}

// isPublishRefusal reports whether e, a mirror's pkg.fetch, is its record
// of a publish it refused.
func isPublishRefusal(e *event.Event) bool {
	return e.Pkg != nil && e.Pkg.Rule == PublishRefusedRule
}

// checkPublishRefusal raises RulePublish when the mirror refused a
// publish by a script's process. The mirror's record can be journaled
// before the kernel's of its process's fork and exec, and after that of
// its exit: one of a pid yet unknown waits for its fork or exec
// (publishProcessKnown), and one of a pid gone finds it in exited.
func (s *state) checkPublishRefusal(e *event.Event) {
	g := s.scriptGroup(e)
	if e.Proc != nil && s.procs[e.Proc.Pid] == nil {
		g = s.exited[e.Proc.Pid]
		if g == nil {
			s.awaitProcess(e)
			return
		}
	}
	s.raisePublish(g, e)
}

// awaitProcess keeps a refusal by a process the view has yet to see,
// the latest maxEarly of them.
func (s *state) awaitProcess(e *event.Event) {
	pid := e.Proc.Pid
	if _, ok := s.early[pid]; !ok {
		s.earlyOrder = append(s.earlyOrder, pid)
	}
	s.early[pid] = e
	for len(s.earlyOrder) > maxEarly {
		delete(s.early, s.earlyOrder[0])
		s.earlyOrder = s.earlyOrder[1:]
	}
}

// publishProcessKnown checks a refusal waiting for the process of ev, a
// fork or exec just added.
func (s *state) publishProcessKnown(ev *event.Event) {
	if ev.Proc == nil || s.early[ev.Proc.Pid] == nil {
		return
	}
	pid := ev.Proc.Pid
	e := s.early[pid]
	delete(s.early, pid)
	s.earlyOrder = slices.DeleteFunc(s.earlyOrder, func(p int32) bool { return p == pid })
	s.raisePublish(s.scriptGroup(e), e)
}

// raisePublish raises RulePublish for the refusal e of a process of
// script group g, if g is one and has not raised it.
func (s *state) raisePublish(g *group, e *event.Event) {
	if g == nil || !g.once(RulePublish) {
		return
	}
	s.raiseFor(g, e, RulePublish, "install script published a package",
		fmt.Sprintf("an install script of %s tried to publish %s %s: the mirror refused it (%s); %s",
			render.Clean(s.packageOf(g), 256), render.Clean(e.Pkg.Ecosystem, 16), render.Clean(e.Pkg.Name, 214),
			render.Clean(e.Pkg.Reason, 200), procName(e.Proc)), e.Seq)
}

// pthWritten keeps a .pth file that a pip process (pip, or what runs
// under it) wrote into a site-packages or dist-packages directory: a
// script's raises RulePthFile at once, a wheel's waits for the RECORD
// that names its wheel (pthRecord), or its process's exit (pthExit).
func (s *state) pthWritten(p string, e *event.Event) {
	if !strings.HasSuffix(p, ".pth") || !siteDir(path.Dir(p)) || strings.Contains(p, "/pip-build-env-") {
		return // a build environment's lives for one build, whose code runs anyway
	}
	pr := s.procs[e.Proc.Pid]
	if pr == nil || pr.host || (pr.under|pr.self)&mgrPip == 0 {
		return
	}
	if g := pr.group; g != nil {
		s.raiseFor(g, e, RulePthFile, "a .pth file was installed", fmt.Sprintf("an install script of %s wrote %s: pid %d",
			render.Clean(s.packageOf(g), 256), render.Clean(p, 256), e.Proc.Pid), e.Seq)
		return
	}
	if s.live && len(s.pth) >= maxPth {
		s.dropped++
		return
	}
	s.pth[e.Proc.Pid] = append(s.pth[e.Proc.Pid], pthFile{seq: e.Seq, path: p})
}

func siteDir(dir string) bool {
	b := path.Base(dir)
	return b == "site-packages" || b == "dist-packages"
}

// pthRecord decides the .pth files a process wrote in the site directory
// of the dist-info RECORD it now puts in place: they are that wheel's,
// and raise RulePthFile unless it is a wheel the host bundles, or the file
// is one the wheel of that name is known to ship (benignPth).
func (s *state) pthRecord(p string, e *event.Event) {
	ps := s.pth[e.Proc.Pid]
	if len(ps) == 0 || !strings.HasSuffix(p, "/RECORD") {
		return
	}
	m, ok := pipManifest(p)
	if !ok {
		return
	}
	site := path.Dir(path.Dir(p))
	_, key := keys(resolver.PyPI, m.name, m.version)
	var rest []pthFile
	for _, f := range ps {
		switch {
		case path.Dir(f.path) != site:
			rest = append(rest, f)
		case !s.o.systemWheels[key] && !benignPth(m.name, path.Base(f.path)):
			pkg := purl.Of(resolver.PyPI, resolver.NormalizeName(resolver.PyPI, m.name), m.version)
			for _, r := range s.byName[nameKeyOf(resolver.PyPI, m.name)] {
				r.pkg.Alerts = appendNew(r.pkg.Alerts, RulePthFile)
			}
			s.raisePkg(e, RulePthFile, "a .pth file was installed", pkg,
				fmt.Sprintf("pip (pid %d) installed %s with %s: code in a .pth runs at every start of the interpreter",
					e.Proc.Pid, render.Clean(f.path, 256), render.Clean(pkg, 256)), f.seq, e.Seq)
		}
	}
	s.pth[e.Proc.Pid] = rest
	if len(rest) == 0 {
		delete(s.pth, e.Proc.Pid)
	}
}

// pthExit raises RulePthFile for the .pth files process pid wrote whose
// wheel no RECORD named before it ended.
func (s *state) pthExit(pid int32, e *event.Event) {
	for _, f := range s.pth[pid] {
		s.raisePkg(e, RulePthFile, "a .pth file was installed", "",
			fmt.Sprintf("pip (pid %d) wrote %s and named no wheel's RECORD in its directory: code in a .pth runs at every start of the interpreter",
				pid, render.Clean(f.path, 256)), f.seq)
	}
	delete(s.pth, pid)
}

// nameKeyOf is the name key of a package (keys).
func nameKeyOf(eco, name string) string {
	k, _ := keys(eco, name, "")
	return k
}

// rememberExit keeps the script group of process pid, which is exiting,
// for the mirror's records of its last requests (checkPublishRefusal);
// the last maxExited are kept.
func (s *state) rememberExit(pid int32) {
	p := s.procs[pid]
	if p == nil || p.group == nil || p.host {
		delete(s.exited, pid) // a reused pid's earlier script is not this one
		return
	}
	if _, ok := s.exited[pid]; !ok {
		s.exitOrder = append(s.exitOrder, pid)
	}
	s.exited[pid] = p.group
	for len(s.exitOrder) > maxExited {
		delete(s.exited, s.exitOrder[0])
		s.exitOrder = s.exitOrder[1:]
	}
}

// procName is a process as a summary names it: "pid 12 (node)", or
// "pid 12" when the record has no comm.
func procName(p *event.Proc) string {
	if p.Comm == "" {
		return fmt.Sprintf("pid %d", p.Pid)
	}
	return fmt.Sprintf("pid %d (%s)", p.Pid, render.Clean(p.Comm, 16))
}
