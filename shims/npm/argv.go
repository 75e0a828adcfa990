package npm

import (
	"slices"
	"strings"
	"sync"
)

// The option table is npm 11's config definitions
// (@npmcli/config/lib/definitions), reduced to what decides how nopt
// reads the argument after an option: a Boolean option never takes one
// (except a literal true or false), an option whose type also allows
// Boolean takes one only when it is a value the type allows, a plain
// String option takes one unless it looks like an option, and every
// other typed option takes the next argument whatever it is.
type kind int

const (
	kindValue    kind = iota // path, url, number, enum, String+Array: takes the next argument
	kindString               // String alone: takes the next argument unless it is -x or --x
	kindBool                 // Boolean: takes a literal true or false only
	kindBoolStr              // [null, Boolean, String]: takes true/false/null, or one not starting -x
	kindBoolEnum             // [null, Boolean] or ["always", Boolean]: takes true/false/null/always
)

var boolOpts = sync.OnceValue(func() []string {
	return strings.Fields(`all allow-same-version audit bin-links bypass-2fa commit-hooks
	dangerously-allow-all-scripts description dev diff-ignore-all-space diff-name-only diff-no-prefix
	diff-text dry-run engine-strict force foreground-scripts format-package-lock fund git-tag-version
	global global-style if-present ignore-scripts include-staged include-workspace-root
	include-attestations init-private install-links json legacy-bundling legacy-peer-deps link long
	offline omit-lockfile-registry-resolved package-lock package-lock-only parseable
	allow-scripts-pending allow-scripts-pin prefer-dedupe prefer-offline prefer-online progress
	provenance read-only rebuild-bundle save save-bundle save-dev save-exact save-optional save-peer
	save-prod packages-all shrinkwrap sign-git-commit sign-git-tag strict-peer-deps
	strict-allow-scripts strict-ssl timing unicode update-notifier usage version versions
	workspaces-update`)
})

var stringOpts = sync.OnceValue(func() []string {
	return strings.Fields(`call diff-dst-prefix diff-src-prefix editor git heading
	init-author-email init-author-name init-license init-type init.author.email init.author.name
	init.license message pack-destination preid save-prefix scope searchexclude searchopts shell tag
	tag-version-prefix user-agent viewer`)
})

var valueOpts = sync.OnceValue(func() []string {
	return strings.Fields(`_auth access allow-directory allow-file allow-git allow-remote
	allow-scripts also audit-level auth-type before ca cache cache-max cache-min cafile cert cidr cpu
	depth diff diff-unified expect-result-count expires fetch-retries fetch-retry-factor
	fetch-retry-maxtimeout fetch-retry-mintimeout fetch-timeout globalconfig https-proxy include
	init-author-url init-module init-version init.author.url init.module init.version
	install-strategy key libc local-address location lockfile-version loglevel logs-dir logs-max
	name maxsockets min-release-age min-release-age-exclude node-gyp node-options noproxy omit only
	orgs os otp package packages prefix provenance-file proxy registry replace-registry-host
	sbom-format sbom-type scopes packages-and-scopes-permission orgs-permission password
	token-description script-shell searchlimit searchstaleness umask userconfig which workspace`)
})

// options maps each of npm's config keys to its kind.
var options = sync.OnceValue(func() map[string]kind {
	m := map[string]kind{}
	for _, k := range valueOpts() {
		m[k] = kindValue
	}
	for _, k := range stringOpts() {
		m[k] = kindString
	}
	for _, k := range boolOpts() {
		m[k] = kindBool
	}
	m["browser"] = kindBoolStr
	for _, k := range []string{"color", "expect-results", "optional", "production", "workspaces", "yes"} {
		m[k] = kindBoolEnum
	}
	return m
})

var optionNames = sync.OnceValue(func() []string {
	var n []string
	for k := range options() {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
})

// shorthands are npm 11's option shorthands.
var shorthands = map[string][]string{
	"enjoy-by": {"--before"}, "d": {"--loglevel", "info"}, "dd": {"--loglevel", "verbose"},
	"ddd": {"--loglevel", "silly"}, "quiet": {"--loglevel", "warn"}, "q": {"--loglevel", "warn"},
	"s": {"--loglevel", "silent"}, "silent": {"--loglevel", "silent"}, "verbose": {"--loglevel", "verbose"},
	"desc": {"--description"}, "help": {"--usage"}, "local": {"--no-global"}, "n": {"--no-yes"},
	"no": {"--no-yes"}, "porcelain": {"--parseable"}, "readonly": {"--read-only"}, "reg": {"--registry"},
	"iwr": {"--include-workspace-root"}, "ws": {"--workspaces"}, "a": {"--all"}, "c": {"--call"},
	"f": {"--force"}, "g": {"--global"}, "L": {"--location"}, "l": {"--long"}, "m": {"--message"},
	"p": {"--parseable"}, "C": {"--prefix"}, "S": {"--save"}, "B": {"--save-bundle"}, "D": {"--save-dev"},
	"E": {"--save-exact"}, "O": {"--save-optional"}, "P": {"--save-prod"}, "?": {"--usage"},
	"H": {"--usage"}, "h": {"--usage"}, "v": {"--version"}, "w": {"--workspace"}, "y": {"--yes"},
}

var shorthandNames = sync.OnceValue(func() []string {
	var n []string
	for k := range shorthands {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
})

// abbrev resolves s as the abbrev package does over words: s itself when
// it is one of them, else the one word that s is a prefix of.
func abbrev(words []string, s string) (string, bool) {
	if s == "" {
		return "", false
	}
	found := ""
	for _, w := range words {
		if w == s {
			return w, true
		}
		if strings.HasPrefix(w, s) {
			if found != "" {
				return "", false
			}
			found = w
		}
	}
	return found, found != ""
}

// config is what npm's argv sets: each key's values in order (a flag
// given twice keeps both), and the positional arguments.
type config struct {
	vals   map[string][]string
	remain []string
}

// last is the last value of key, "" when unset.
func (c *config) last(key string) string {
	v := c.vals[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// parseArgv reads npm's argv as nopt does with npm's option table.
// Boolean values are "true" and "false"; an option given without a value
// it can take is "true".
func parseArgv(argv []string) *config {
	args := slices.Clone(argv)
	c := &config{vals: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if len(arg) >= 2 && strings.Trim(arg, "-") == "" {
			c.remain = append(c.remain, args[i+1:]...)
			break
		}
		if arg == "" || arg[0] != '-' || len(arg) == 1 {
			c.remain = append(c.remain, arg)
			continue
		}
		hadEq := false
		if at := strings.IndexByte(arg, '='); at >= 0 {
			hadEq = true
			arg, args = arg[:at], slices.Insert(slices.Delete(args, i, i+1), i, arg[:at], arg[at+1:])
		}
		if sh := resolveShort(arg); sh != nil {
			args = slices.Insert(slices.Delete(args, i, i+1), i, sh...)
			if arg != sh[0] {
				i--
				continue
			}
		}
		i = c.option(args, i, arg, hadEq)
	}
	return c
}

// option reads the option arg at args[i] and returns the index of the
// last argument it used.
func (c *config) option(args []string, i int, arg string, hadEq bool) int {
	arg = strings.TrimLeft(arg, "-")
	no, neg := false, false
	for strings.HasPrefix(strings.ToLower(arg), "no-") {
		neg, no = true, !no
		arg = arg[3:]
	}
	if full, ok := abbrev(optionNames(), arg); ok {
		arg = full
	}
	k, known := options()[arg]
	la, hasLa := "", i+1 < len(args)
	if hasLa {
		la = args[i+1]
	}
	isBool := neg || (known && (k == kindBool || k == kindBoolStr || k == kindBoolEnum)) || (!known && !hadEq)
	if isBool {
		val := "true"
		if no {
			val = "false"
		}
		switch {
		case hasLa && (la == "true" || la == "false"):
			val = la
			if no {
				val = map[string]string{"true": "false", "false": "true"}[la]
			}
			i++
		case hasLa && known && k == kindBoolEnum && (la == "null" || (arg == "color" && la == "always")):
			val = la
			i++
		case hasLa && known && k == kindBoolStr && (la == "null" || !looksShortOpt(la)):
			val = la
			i++
		}
		c.vals[arg] = append(c.vals[arg], val)
		return i
	}
	val := "true"
	switch {
	case known && k == kindString && (!hasLa || looksOpt(la)):
		// nopt gives a String option "" and leaves an option-like
		// argument to be read next.
		val = ""
		if hasLa {
			i--
		}
	case hasLa && len(la) >= 2 && strings.Trim(la, "-") == "":
		i--
	case hasLa:
		val = la
	}
	c.vals[arg] = append(c.vals[arg], val)
	return i + 1
}

// looksOpt is nopt's /^-{1,2}[^-]+/.
func looksOpt(s string) bool {
	t := strings.TrimPrefix(s, "-")
	t = strings.TrimPrefix(t, "-")
	return len(t) < len(s) && t != "" && t[0] != '-'
}

// looksShortOpt is nopt's /^-[^-]/.
func looksShortOpt(s string) bool { return len(s) >= 2 && s[0] == '-' && s[1] != '-' }

// resolveShort expands a shorthand as nopt's resolveShort does, or
// returns nil when arg is not one.
func resolveShort(arg string) []string {
	arg = strings.TrimLeft(arg, "-")
	if full, ok := abbrev(optionNames(), arg); ok && full == arg {
		return nil
	}
	if sh, ok := shorthands[arg]; ok {
		return sh
	}
	if arg != "" && singles(arg) {
		var out []string
		for _, r := range arg {
			out = append(out, shorthands[string(r)]...)
		}
		return out
	}
	if _, ok := abbrev(optionNames(), arg); ok {
		return nil
	}
	if full, ok := abbrev(shorthandNames(), arg); ok {
		return shorthands[full]
	}
	return nil
}

// singles reports whether every character of s is a one-character
// shorthand.
func singles(s string) bool {
	for _, r := range s {
		if sh := shorthands[string(r)]; sh == nil || len(string(r)) != 1 {
			return false
		}
	}
	return true
}

// commands are npm 11's commands (lib/utils/cmd-list.js), and aliases its
// aliases.
var commands = sync.OnceValue(func() []string {
	return strings.Fields(`access adduser approve-scripts audit bugs cache ci completion config
	dedupe deny-scripts deprecate diff dist-tag docs doctor edit exec explain explore find-dupes fund
	get help help-search init install install-ci-test install-scripts install-test link ll login logout
	ls org outdated owner pack ping pkg prefix profile prune publish query rebuild repo restart root run
	sbom search set shrinkwrap stage star stars start stop team test token trust undeprecate uninstall
	unpublish unstar update version view whoami`)
})

var aliases = map[string]string{
	"author": "owner", "home": "docs", "issues": "bugs", "info": "view", "show": "view", "find": "search",
	"add": "install", "unlink": "uninstall", "remove": "uninstall", "rm": "uninstall", "r": "uninstall",
	"un": "uninstall", "rb": "rebuild", "list": "ls", "ln": "link", "create": "init", "i": "install",
	"it": "install-test", "cit": "install-ci-test", "u": "update", "up": "update", "c": "config",
	"s": "search", "se": "search", "tst": "test", "t": "test", "ddp": "dedupe", "v": "view",
	"run-script": "run", "clean-install": "ci", "clean-install-test": "install-ci-test", "x": "exec",
	"why": "explain", "la": "ll", "verison": "version", "ic": "ci", "innit": "init", "in": "install",
	"ins": "install", "inst": "install", "insta": "install", "instal": "install", "isnt": "install",
	"isnta": "install", "isntal": "install", "isntall": "install", "install-clean": "ci",
	"isntall-clean": "ci", "hlep": "help", "dist-tags": "dist-tag", "upgrade": "update",
	"udpate": "update", "rum": "run", "sit": "install-ci-test", "urn": "run", "ogr": "org",
	"add-user": "adduser",
}

var commandWords = sync.OnceValue(func() []string {
	w := slices.Clone(commands())
	for a := range aliases {
		w = append(w, a)
	}
	slices.Sort(w)
	return w
})

// deref is npm's deref: the command that c names, "" for none.
func deref(c string) string {
	if c == "" {
		return ""
	}
	if strings.ContainsAny(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		var b strings.Builder
		for _, r := range c {
			if r >= 'A' && r <= 'Z' {
				b.WriteByte('-')
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		}
		c = b.String()
	}
	if slices.Contains(commands(), c) {
		return c
	}
	if a, ok := aliases[c]; ok {
		return a
	}
	a, _ := abbrev(commandWords(), c)
	for i := 0; i < 4 && aliases[a] != ""; i++ {
		a = aliases[a]
	}
	return a
}
