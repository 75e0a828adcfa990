package pkgview

import (
	"path"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver"
)

// The programs the install-time behaviour rules look for in a script's
// execs, each list in one place: AI agents' CLIs and the flags that turn
// their permission checks off, credential scanners, and the managers'
// publish commands.

// aiCLI is an AI coding agent's command line: the names it is run by (its
// executable, and its npm package for npx), the flags that alone turn off
// its permission checks, and the options whose value does.
type aiCLI struct {
	names  []string
	flags  []string
	values map[string][]string
}

// aiCLIs are the agents' CLIs and their permission-bypass flags, from
// each one's own --help and documentation.
var aiCLIs = []aiCLI{
	// Claude Code.
	{names: []string{"claude", "@anthropic-ai/claude-code"},
		flags:  []string{"--dangerously-skip-permissions", "--allow-dangerously-skip-permissions"},
		values: map[string][]string{"--permission-mode": {"bypassPermissions"}}},
	// Gemini CLI, and Qwen Code (its fork).
	{names: []string{"gemini", "@google/gemini-cli", "qwen", "@qwen-code/qwen-code"},
		flags:  []string{"--yolo", "-y"},
		values: map[string][]string{"--approval-mode": {"yolo"}}},
	// OpenAI Codex CLI.
	{names: []string{"codex", "@openai/codex"},
		flags: []string{"--dangerously-bypass-approvals-and-sandbox", "--yolo", "--full-auto"},
		values: map[string][]string{"--sandbox": {"danger-full-access"}, "-s": {"danger-full-access"},
			"--ask-for-approval": {"never"}, "-a": {"never"}}},
	// Amazon Q Developer CLI (q chat) and its successor Kiro CLI.
	{names: []string{"q", "kiro-cli"}, flags: []string{"--trust-all-tools"}},
	// Cursor's CLI.
	{names: []string{"cursor-agent"}, flags: []string{"--force", "-f", "--yolo"}},
	// GitHub Copilot CLI.
	{names: []string{"copilot", "@github/copilot"},
		flags: []string{"--allow-all-tools", "--allow-all-paths", "--allow-all-urls", "--allow-all", "--yolo"}},
	// Sourcegraph Amp.
	{names: []string{"amp", "@sourcegraph/amp"}, flags: []string{"--dangerously-allow-all"}},
	// Aider.
	{names: []string{"aider"}, flags: []string{"--yes-always"}},
}

// secretScanners are credential scanners, by the names they are run by.
var secretScanners = []string{"trufflehog", "gitleaks", "detect-secrets", "detect-secrets-hook", "noseyparker",
	"nosey-parker", "ggshield", "git-secrets", "secretlint", "ripsecrets", "kingfisher", "whispers", "talisman"}

// publishers are the commands that publish a package, and the subcommand
// (the first argument that is no option) that does.
var publishers = map[string]string{"npm": "publish", "pnpm": "publish", "yarn": "publish", "yarnpkg": "publish",
	"bun": "publish", "cargo": "publish", "twine": "upload", "poetry": "publish", "uv": "publish", "flit": "publish",
	"hatch": "publish", "gem": "push"}

// benignPths are the .pth files that wheels of the name are known to
// ship, by normalised name: setuptools' distutils-precedence.pth (which
// every virtual environment with setuptools has) and virtualenv's
// _virtualenv.pth. A compromised wheel of that name can still ship one.
var benignPths = map[string]string{"setuptools": "distutils-precedence.pth", "virtualenv": "_virtualenv.pth"}

// benignPth reports whether the wheel name ships the .pth file base
// (benignPths).
func benignPth(name, base string) bool {
	f, ok := benignPths[resolver.NormalizeName(resolver.PyPI, name)]
	return ok && f == base
}

// launchers run the program their first argument names: an interpreter
// running a script, or a package runner running a package's bin.
var launchers = map[string]bool{"npx": true, "pnpx": true, "bunx": true, "node": true, "nodejs": true, "bun": true,
	"deno": true, "env": true, "sh": true, "bash": true, "dash": true, "zsh": true, "python": true, "python3": true,
	"uvx": true, "pipx": true}

// namesOf are the names an exec runs a program by: its executable's and
// argv[0]'s base names and, when that is a launcher, its first argument
// that is no option, as a base name and as an npm package name without its
// version. The dynamic loader run as a program is read through
// (loadedProgram).
func namesOf(exe string, argv []string) []string {
	exe, argv = loadedProgram(exe, argv)
	names := []string{path.Base(exe)}
	if len(argv) > 0 {
		names = append(names, path.Base(argv[0]))
	}
	for _, n := range names {
		if !isLauncher(n) {
			continue
		}
		for _, a := range argv[min(1, len(argv)):] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			names = append(names, path.Base(a), packageName(a))
			break
		}
		break
	}
	return names
}

// isLauncher reports whether a program's base name is a launcher's
// (launchers, any python or node).
func isLauncher(n string) bool {
	return launchers[n] || pythonExe.MatchString(n) || nodeExe.MatchString(n)
}

// interpreter reports whether an exec runs a launcher, whose first
// argument is then the script it runs.
func interpreter(exe string, argv []string) bool {
	exe, argv = loadedProgram(exe, argv)
	return isLauncher(path.Base(exe)) || len(argv) > 0 && isLauncher(path.Base(argv[0]))
}

// packageName is an npm package spec without its version
// (@scope/name@1 is @scope/name).
func packageName(spec string) string {
	if i := strings.LastIndexByte(spec, '@'); i > 0 {
		return spec[:i]
	}
	return spec
}

// aiUnsafe reports whether names (namesOf) name an AI agent's CLI and
// argv turns its permission checks off: which CLI, and the flag.
func aiUnsafe(names, argv []string) (cli, flag string, ok bool) {
	for _, c := range aiCLIs {
		if !anyIn(names, c.names) {
			continue
		}
		for i, a := range argv[min(1, len(argv)):] {
			opt, val, hasVal := strings.Cut(a, "=")
			if !hasVal && slices.Contains(c.flags, a) {
				return c.names[0], a, true
			}
			want, valued := c.values[opt]
			if !valued {
				continue
			}
			if !hasVal && i+2 < len(argv) {
				val = argv[i+2]
			}
			if slices.Contains(want, val) {
				return c.names[0], opt + " " + val, true
			}
		}
	}
	return "", "", false
}

// secretScanner reports whether names (namesOf) name a credential scanner.
func secretScanner(names []string) (string, bool) {
	for _, n := range names {
		if slices.Contains(secretScanners, n) {
			return n, true
		}
	}
	return "", false
}

// publishCommand reports whether an exec runs a manager's publish
// command (npm publish, cargo publish, twine upload, ...): the command
// as the rule names it.
func publishCommand(names, argv []string) (string, bool) {
	for _, n := range names[:min(2, len(names))] {
		sub, ok := publishers[n]
		if !ok {
			continue
		}
		for _, a := range argv[min(1, len(argv)):] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if a == sub {
				return n + " " + sub, true
			}
			break
		}
	}
	return "", false
}

func anyIn(names, set []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(set, n) })
}
