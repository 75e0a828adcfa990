package pkgview

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// behaviourRules are the rule ids of conduct.go.
var behaviourRules = []string{RuleCredentialExfil, RuleAIAgentUnsafe, RulePersistence, RulePlantedRan, RuleRawIPExec,
	RulePthFile, RulePublish, RuleSecretScanner}

// npmScript starts an npm install through the shim (pid 10, npm 11) that
// fetches name@1.0.0 from the mirror (npm connecting to it first, so the
// view learns its address) and runs its postinstall (sh, pid 12, in its
// directory), and returns the pid the script's commands run as (13, a
// node under the sh).
func npmScript(r *rec, name string) int32 {
	r.spawn(10, 1, shimNpm, "/w", "npm", "install", name)
	r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "install", name)
	r.connect(11, "127.0.0.1", 8484, "")
	r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 11, Comm: "npm"}
		e.Pkg = &event.Pkg{Ecosystem: "npm", Name: name, Resolved: "1.0.0", Hash: sriA, Outcome: "served",
			Verified: event.Bool(true), Purl: "pkg:npm/" + name + "@1.0.0"}
	})
	r.spawn(12, 11, "/bin/sh", "/w/node_modules/"+name, "sh", "-c", "node install.js")
	r.spawn(13, 12, "/usr/bin/node", "/w/node_modules/"+name, "node", "install.js")
	return 13
}

// finish ends the install: the script's and npm's exits, the shim's claim.
func finish(r *rec, name string) {
	r.exit(13)
	r.exit(12)
	r.exit(11)
	r.install("npm", name, "1.0.0", sriA, 11)
	r.exit(10)
}

func (r *rec) dns(pid int32, name, ip string) *event.Event {
	return r.add(event.KindNetDNS, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid}
		e.Net = &event.Net{Op: "dns", Proto: "udp", DstIP: "127.0.0.53", DstPort: 53,
			DNS: &event.DNS{Query: name, QType: "A", RCode: "NOERROR", Answers: []event.DNSAnswer{{Type: "A", Data: ip, TTL: 60}}}}
	})
}

// raised is what a test checks of an alert: rule and package.
func raised(alerts []*event.Event) []string {
	var out []string
	for _, a := range alerts {
		if slices.Contains(behaviourRules, a.Alert.RuleID) {
			out = append(out, a.Alert.RuleID+" "+a.Alert.Package)
		}
	}
	return out
}

func TestInstallTimeRules(t *testing.T) {
	const pkg = "pkg:npm/x@1.0.0"
	tests := []struct {
		name   string
		events func(r *rec)
		want   []string
	}{
		{"credentials read, then a connection out", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "read", "/home/agent/.aws/credentials")
			r.connect(pid, "127.0.0.7", 9000, "")
			r.connect(pid, "203.0.113.9", 443, "exfil.example")
			finish(r, "x")
		}, []string{RuleCredentialExfil + " " + pkg}},
		{"control: credentials read, then only the mirror", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "read", "/home/agent/.npmrc")
			r.connect(pid, "127.0.0.1", 8484, "")
			r.add(event.KindNetSend, event.SourceKernel, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: pid}
				e.Net = &event.Net{Op: "send", Proto: "udp", DstIP: "127.0.0.53", DstPort: 53}
			})
			finish(r, "x")
		}, nil},
		{"control: a connection out, no credentials read", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "read", "/etc/passwd")
			r.connect(pid, "203.0.113.9", 443, "example.org")
			finish(r, "x")
		}, nil},
		{"control: npm itself reads .npmrc and connects", func(r *rec) {
			npmScript(r, "x")
			r.file(11, "read", "/home/agent/.npmrc")
			r.connect(11, "203.0.113.9", 443, "")
			finish(r, "x")
		}, nil},
		{"an AI agent's CLI with its checks off", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "claude", "/w/node_modules/x", "claude", "--dangerously-skip-permissions", "-p", "inventory")
			r.spawn(15, pid, "/usr/bin/gemini", "/w/node_modules/x", "gemini", "--yolo", "-p", "x")
			finish(r, "x")
		}, []string{RuleAIAgentUnsafe + " " + pkg}},
		{"an AI agent's CLI through npx, a valued flag", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "/usr/bin/npx", "/w/node_modules/x", "npx", "-y", "@openai/codex@0.1", "exec", "--sandbox", "danger-full-access", "x")
			finish(r, "x")
		}, []string{RuleAIAgentUnsafe + " " + pkg}},
		{"control: an AI agent's CLI with its checks on", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "claude", "/w/node_modules/x", "claude", "--version")
			r.spawn(15, pid, "/usr/bin/codex", "/w/node_modules/x", "codex", "--sandbox", "read-only")
			finish(r, "x")
		}, nil},
		{"control: the agent runs claude, no script", func(r *rec) {
			r.spawn(30, 1, "claude", "/w", "claude", "--dangerously-skip-permissions")
		}, nil},
		{"a credential scanner", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "/tmp/x/trufflehog", "/w/node_modules/x", "trufflehog", "filesystem", "/home")
			finish(r, "x")
		}, []string{RuleSecretScanner + " " + pkg}},
		{"a shell startup file, then a shell reads it", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "write", "/home/agent/.bashrc")
			finish(r, "x")
			r.spawn(40, 1, "/bin/bash", "/home/agent", "bash", "-i")
			r.file(40, "read", "/home/agent/.bashrc")
		}, []string{RulePersistence + " " + pkg, RulePlantedRan + " " + pkg}},
		{"a git hook renamed into place, then run", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "create", "/w/.git/hooks/pre-commit.tmp")
			r.rename(pid, "/w/.git/hooks/pre-commit.tmp", "/w/.git/hooks/pre-commit")
			r.spawn(14, pid, "/bin/chmod", "/w", "chmod", "+x", "/w/.git/hooks/pre-commit") // runs nothing
			finish(r, "x")
			r.spawn(40, 1, ".git/hooks/pre-commit", "/w", ".git/hooks/pre-commit")
		}, []string{RulePersistence + " " + pkg, RulePlantedRan + " " + pkg}},
		{"cron, systemd and agent configs: one alert per class", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "write", "/var/spool/cron/crontabs/agent")
			r.file(pid, "create", "/home/agent/.config/systemd/user/x.service")
			r.file(pid, "create", "/home/agent/.claude/settings.json")
			r.file(pid, "create", "/w/AGENTS.md")
			finish(r, "x")
		}, []string{RulePersistence + " " + pkg, RulePersistence + " " + pkg, RulePersistence + " " + pkg}},
		{"control: a package's own files, git's samples", func(r *rec) {
			pid := npmScript(r, "x")
			r.file(pid, "create", "/w/node_modules/x/AGENTS.md")
			r.file(pid, "create", "/w/node_modules/x/.git/hooks/pre-commit")
			r.file(pid, "create", "/w/.git/hooks/pre-commit.sample")
			r.file(pid, "write", "/w/node_modules/x/build/out.js")
			finish(r, "x")
			r.spawn(40, 1, "/bin/sh", "/w", "sh", "/w/node_modules/x/build/out.js")
		}, nil},
		{"a raw address, then a file it wrote run", func(r *rec) {
			pid := npmScript(r, "x")
			r.connect(pid, "127.0.0.9", 8000, "")
			r.file(pid, "create", "/tmp/stage2")
			r.spawn(14, pid, "/tmp/stage2", "/w/node_modules/x", "/tmp/stage2")
			finish(r, "x")
		}, []string{RuleRawIPExec + " " + pkg}},
		{"control: a resolved name, then a file it wrote run", func(r *rec) {
			pid := npmScript(r, "x")
			r.dns(pid, "cdn.example.", "192.0.2.7")
			r.connect(pid, "192.0.2.7", 443, "")
			r.connect(pid, "192.0.2.8", 443, "cdn.example")
			r.connect(pid, "127.0.0.1", 8484, "") // the mirror
			r.file(pid, "create", "/w/node_modules/x/bin/tool")
			r.spawn(14, pid, "bin/tool", "/w/node_modules/x", "bin/tool", "--version")
			finish(r, "x")
		}, nil},
		{"control: a raw address, then a file it did not write", func(r *rec) {
			pid := npmScript(r, "x")
			r.connect(pid, "127.0.0.9", 8000, "")
			r.spawn(14, pid, "/bin/sh", "/w/node_modules/x", "sh", "-c", "true")
			finish(r, "x")
		}, nil},
		{"a publish the mirror refused", func(r *rec) {
			pid := npmScript(r, "x")
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: pid, Comm: "node"}
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "victim", Outcome: "blocked", Verdict: "block",
					Rule: PublishRefusedRule, Reason: "PUT /npm/victim: the mirror serves GET and HEAD only"}
			})
			finish(r, "x")
		}, []string{RulePublish + " " + pkg}},
		{"a publish the mirror refused, recorded after the process exited", func(r *rec) {
			pid := npmScript(r, "x")
			r.exit(pid)
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: pid, Comm: "node"}
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "victim", Outcome: "blocked", Rule: PublishRefusedRule}
			})
			finish(r, "x")
		}, []string{RulePublish + " " + pkg}},
		{"a publish the mirror refused, recorded before the process's fork", func(r *rec) {
			pid := npmScript(r, "x")
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 14, Comm: "node"}
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "victim", Outcome: "blocked", Rule: PublishRefusedRule}
			})
			r.spawn(14, pid, "/usr/bin/node", "/w/node_modules/x", "node", "-e", "put()")
			r.exit(14)
			finish(r, "x")
		}, []string{RulePublish + " " + pkg}},
		{"control: a refusal before the fork of a process outside scripts", func(r *rec) {
			npmScript(r, "x")
			finish(r, "x")
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 60, Comm: "node"}
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "mine", Outcome: "blocked", Rule: PublishRefusedRule}
			})
			r.spawn(60, 1, "/usr/bin/node", "/w", "node", "-e", "put()")
		}, nil},
		{"npm publish run by a script", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "npm", "/tmp/victim", "npm", "publish", "--access", "public")
			finish(r, "x")
		}, []string{RulePublish + " " + pkg}},
		{"control: a publish refused outside scripts, npm view in a script", func(r *rec) {
			pid := npmScript(r, "x")
			r.spawn(14, pid, "npm", "/w/node_modules/x", "npm", "view", "publish")
			finish(r, "x")
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 50, Comm: "npm"}
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "mine", Outcome: "blocked", Rule: PublishRefusedRule}
			})
		}, nil},
		{"a wheel's .pth, named by its RECORD", func(r *rec) {
			r.spawn(20, 1, testShimDir+"/pip", "/w", "pip", "install", "evil")
			r.spawn(21, 20, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "evil")
			site := "/home/agent/.local/lib/python3.11/site-packages"
			r.file(21, "create", site+"/evil_init.pth")
			r.file(21, "create", site+"/evil-1.0.dist-info/METADATA")
			r.file(21, "create", site+"/evil-1.0.dist-info/RECORD.tmp")
			r.rename(21, site+"/evil-1.0.dist-info/RECORD.tmp", site+"/evil-1.0.dist-info/RECORD")
			r.exit(21)
		}, []string{RulePthFile + " pkg:pypi/evil@1.0"}},
		{"control: a system wheel's .pth, a .pth outside site-packages, not pip's", func(r *rec) {
			r.spawn(20, 1, testShimDir+"/pip", "/w", "pip", "install", "setuptools")
			r.spawn(21, 20, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "setuptools")
			site := "/home/agent/v/lib/python3.11/site-packages"
			r.file(21, "create", site+"/distutils-precedence.pth")
			r.file(21, "create", site+"/setuptools-66.1.1.dist-info/RECORD")
			r.file(21, "create", "/home/agent/t/x.pth")
			r.exit(21)
			r.spawn(30, 1, "/usr/bin/python3", "/w", "python3", "x.py")
			r.file(30, "create", site+"/y.pth")
			r.spawn(22, 20, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "setuptools==80.0")
			r.file(22, "create", site+"/distutils-precedence.pth")
			r.file(22, "create", site+"/setuptools-80.0.dist-info/RECORD")
			build := "/tmp/pip-build-env-abc/overlay/lib/python3.11/site-packages"
			r.file(22, "create", build+"/evil.pth")
			r.file(22, "create", build+"/evil-1.0.dist-info/RECORD")
			r.exit(22)
		}, nil},
		{"another wheel's distutils-precedence.pth", func(r *rec) {
			r.spawn(21, 1, "/usr/bin/pip", "/w", "pip", "install", "evil")
			site := "/home/agent/v/lib/python3.11/site-packages"
			r.file(21, "create", site+"/distutils-precedence.pth")
			r.file(21, "create", site+"/evil-1.0.dist-info/RECORD")
		}, []string{RulePthFile + " pkg:pypi/evil@1.0"}},
		{"a .pth whose process wrote no RECORD", func(r *rec) {
			r.spawn(21, 1, "/usr/bin/pip", "/w", "pip", "install", "evil")
			r.file(21, "create", "/usr/lib/python3/dist-packages/evil.pth")
			r.exit(21)
		}, []string{RulePthFile + " "}},
	}
	wheels := WithSystemWheels(SystemWheel{"setuptools", "66.1.1"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("s")
			tt.events(r)
			v := build(r.evs, wheels)
			if got := raised(v.Alerts); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Build alerts = %q, want %q\n%s", got, tt.want, summaries(v.Alerts))
			}
			w := newWatcher(wheels)
			var live []*event.Event
			for _, e := range r.evs {
				live = append(live, w.Add(e)...)
			}
			live = append(live, w.Add(&event.Event{SessionID: "s", Kind: event.KindSessionTerminate, Source: event.SourceSession})...)
			if got := raised(live); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Watcher alerts = %q, want %q\n%s", got, tt.want, summaries(live))
			}
		})
	}
}

func summaries(alerts []*event.Event) string {
	var b strings.Builder
	for _, a := range alerts {
		fmt.Fprintf(&b, "  %s %s refs %v: %s\n", a.Alert.RuleID, a.Alert.Package, a.Alert.Refs, a.Alert.Summary)
	}
	return b.String()
}

// TestInstallTimeRuleRefs checks an alert's evidence, level, tags and
// row: the credential read and the connection, in order.
func TestInstallTimeRuleRefs(t *testing.T) {
	r := newRec("s")
	pid := npmScript(r, "x")
	read := r.file(pid, "read", "/home/agent/.ssh/id_ed25519")
	conn := r.connect(pid, "127.0.0.7", 9000, "")
	finish(r, "x")
	v := build(r.evs)
	var a *event.Alert
	for _, e := range v.Alerts {
		if e.Alert.RuleID == RuleCredentialExfil {
			a = e.Alert
		}
	}
	if a == nil {
		t.Fatalf("no %s alert: %s", RuleCredentialExfil, summaries(v.Alerts))
	}
	if !slices.Equal(a.Refs, []uint64{read.Seq, conn.Seq}) || a.Level != "critical" || len(a.Tags) == 0 {
		t.Errorf("alert refs %v level %s tags %v, want [%d %d] critical with tags", a.Refs, a.Level, a.Tags, read.Seq, conn.Seq)
	}
	for _, p := range v.Packages {
		if p.Name == "x" && (!slices.Contains(p.Alerts, RuleCredentialExfil) || p.InstallActivity != ActivityScripts) {
			t.Errorf("row x: alerts %v, activity %q; want %s and %s", p.Alerts, p.InstallActivity, RuleCredentialExfil, ActivityScripts)
		}
	}
}

// TestNoInstallTimeActivity: a package whose code runs only when it is
// imported has no script; its row says no install-time activity.
func TestNoInstallTimeActivity(t *testing.T) {
	r := newRec("s")
	r.fetch("npm", "chalk", "5.6.1", sriA, "served")
	r.install("npm", "chalk", "5.6.1", sriA, 11)
	r.blocked("npm", "evil", "1.0.0", "blocklist")
	v := build(r.evs)
	got := map[string]string{}
	for _, p := range v.Packages {
		got[p.Name] = p.InstallActivity
	}
	if want := map[string]string{"chalk": ActivityNone, "evil": ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("install activity = %v, want %v", got, want)
	}
}

func TestAIUnsafe(t *testing.T) {
	tests := []struct {
		exe  string
		argv []string
		want string // cli flag, "" for none
	}{
		{"claude", []string{"claude", "--dangerously-skip-permissions"}, "claude --dangerously-skip-permissions"},
		{"claude", []string{"claude", "--permission-mode", "bypassPermissions", "-p", "x"}, "claude --permission-mode bypassPermissions"},
		{"claude", []string{"claude", "--permission-mode=bypassPermissions"}, "claude --permission-mode bypassPermissions"},
		{"claude", []string{"claude", "--permission-mode", "plan"}, ""},
		{"gemini", []string{"gemini", "-y", "-p", "x"}, "gemini -y"},
		{"gemini", []string{"gemini", "--approval-mode=yolo"}, "gemini --approval-mode yolo"},
		{"/usr/bin/codex", []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox"}, "codex --dangerously-bypass-approvals-and-sandbox"},
		{"codex", []string{"codex", "--full-auto", "x"}, "codex --full-auto"},
		{"codex", []string{"codex", "-a", "never"}, "codex -a never"},
		{"q", []string{"q", "chat", "--trust-all-tools", "--no-interactive"}, "q --trust-all-tools"},
		{"cursor-agent", []string{"cursor-agent", "-p", "--force", "x"}, "cursor-agent --force"},
		{"copilot", []string{"copilot", "-p", "x", "--allow-all-tools"}, "copilot --allow-all-tools"},
		{"/usr/bin/node", []string{"node", "/usr/bin/claude", "--dangerously-skip-permissions"}, "claude --dangerously-skip-permissions"},
		{"npx", []string{"npx", "@anthropic-ai/claude-code@latest", "--dangerously-skip-permissions"}, "claude --dangerously-skip-permissions"},
		{"/bin/ls", []string{"ls", "--dangerously-skip-permissions"}, ""},
		{"gemini", []string{"gemini", "--yolo=false"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			cli, flag, ok := aiUnsafe(namesOf(tt.exe, tt.argv), tt.argv)
			got := ""
			if ok {
				got = cli + " " + flag
			}
			if got != tt.want {
				t.Errorf("aiUnsafe(%q) = %q, want %q", tt.argv, got, tt.want)
			}
		})
	}
}

func TestPersistenceOf(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/home/a/.bashrc", classShellRC},
		{"/home/a/.zshenv", classShellRC},
		{"/etc/profile.d/x.sh", classShellRC},
		{"/home/a/.config/fish/config.fish", classShellRC},
		{"/w/.git/hooks/post-checkout", classGitHook},
		{"/w/.git/hooks/post-checkout.sample", ""},
		{"/etc/cron.d/x", classCron},
		{"/etc/crontab", classCron},
		{"/var/spool/cron/crontabs/a", classCron},
		{"/etc/systemd/system/x.service", classService},
		{"/home/a/.config/systemd/user/x.timer", classService},
		{"/home/a/.claude/settings.json", classAgentConf},
		{"/w/.claude/settings.local.json", classAgentConf},
		{"/w/CLAUDE.md", classAgentConf},
		{"/w/AGENTS.md", classAgentConf},
		{"/home/a/.claude.json", classAgentConf},
		{"/w/.cursor/rules/x.mdc", classAgentConf},
		{"/w/.vscode/tasks.json", classAgentConf},
		{"/home/a/.codex/config.toml", classAgentConf},
		{"/w/.mcp.json", classAgentConf},
		{"/w/node_modules/x/CLAUDE.md", ""},
		{"/w/README.md", ""},
		{"/home/a/.npm/_cacache/x", ""},
	}
	for _, tt := range tests {
		if got := persistenceOf(tt.path); got != tt.want {
			t.Errorf("persistenceOf(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestPublishCommand(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"npm", "publish"}, "npm publish"},
		{[]string{"npm", "--registry", "x", "publish"}, ""}, // the option's value reads as the subcommand: missed
		{[]string{"npm", "--access=public", "publish"}, "npm publish"},
		{[]string{"cargo", "publish", "--allow-dirty"}, "cargo publish"},
		{[]string{"twine", "upload", "dist/*"}, "twine upload"},
		{[]string{"npm", "install"}, ""},
		{[]string{"npm", "view", "publish"}, ""},
	}
	for _, tt := range tests {
		got, _ := publishCommand(namesOf(tt.argv[0], tt.argv), tt.argv)
		if got != tt.want {
			t.Errorf("publishCommand(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

// TestPlantedRanEvidence: a planted git hook is linked to its run, not to
// the chmod that made it executable (a program's arguments run nothing),
// and the alert's refs are the write and the run.
func TestPlantedRanEvidence(t *testing.T) {
	r := newRec("s")
	pid := npmScript(r, "x")
	write := r.file(pid, "create", "/w/.git/hooks/post-merge")
	r.spawn(14, pid, "/bin/chmod", "/w/node_modules/x", "chmod", "+x", "/w/.git/hooks/post-merge")
	finish(r, "x")
	run := r.spawn(40, 1, "/bin/sh", "/w", "sh", ".git/hooks/post-merge")
	v := build(r.evs)
	var refs [][]uint64
	for _, a := range v.Alerts {
		if a.Alert.RuleID == RulePlantedRan {
			refs = append(refs, a.Alert.Refs)
		}
	}
	if want := [][]uint64{{write.Seq, run.Seq}}; !reflect.DeepEqual(refs, want) {
		t.Errorf("%s refs = %v, want %v\n%s", RulePlantedRan, refs, want, summaries(v.Alerts))
	}
}
