package pip

import (
	"strings"
	"sync"
)

// pip's options (pip 23.0 to 23.2, install, download and wheel plus the
// general options; an option of one command is read in the others too),
// reduced to whether each takes a value. optparse takes a long option's
// value from "=" or the next argument, a short option's from the rest of
// the argument or the next one, accepts any unique prefix of a long
// option, and clusters short flags (-qqU).
var valueLong = sync.OnceValue(func() []string {
	return strings.Fields(`requirement constraint editable target platform python-version
	implementation abi root prefix src source source-dir source-directory upgrade-strategy
	config-settings install-option global-option no-binary only-binary progress-bar root-user-action
	report index-url pypi-url extra-index-url find-links python log log-file local-log
	keyring-provider proxy retries timeout default-timeout exists-action trusted-host cert client-cert
	cache-dir use-feature use-deprecated hash dest destination-dir destination-directory wheel-dir
	build-option`)
})

var flagLong = sync.OnceValue(func() []string {
	return strings.Fields(`no-deps no-dependencies pre dry-run user no-user upgrade force-reinstall
	ignore-installed ignore-requires-python no-build-isolation use-pep517 no-use-pep517
	check-build-dependencies break-system-packages compile no-compile no-warn-script-location
	no-warn-conflicts prefer-binary require-hashes no-clean no-index help debug isolated
	require-virtualenv require-venv verbose version quiet no-input no-cache-dir
	disable-pip-version-check no-color no-python-version-warning no-verify`)
})

// shortOpts maps each short option to its long name.
var shortOpts = map[byte]string{'r': "requirement", 'c': "constraint", 'e': "editable", 't': "target",
	'C': "config-settings", 'i': "index-url", 'f': "find-links", 'U': "upgrade", 'I': "ignore-installed",
	'h': "help", 'v': "verbose", 'V': "version", 'q': "quiet", 'd': "dest", 'w': "wheel-dir"}

// aliasOf maps an option's other spellings to the name the planner uses.
var aliasOf = map[string]string{"pypi-url": "index-url", "no-dependencies": "no-deps", "source": "src",
	"source-dir": "src", "source-directory": "src", "log-file": "log", "local-log": "log",
	"default-timeout": "timeout", "require-venv": "require-virtualenv", "destination-dir": "dest",
	"destination-directory": "dest"}

var takesValue = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, o := range valueLong() {
		m[o] = true
	}
	for _, o := range flagLong() {
		m[o] = false
	}
	return m
})

// matchLong resolves a long option as optparse does: itself, else the
// one option it is a prefix of. ok is false for an unknown or ambiguous
// one.
func matchLong(s string) (string, bool) {
	if _, ok := takesValue()[s]; ok {
		return canonical(s), true
	}
	found := ""
	for o := range takesValue() {
		if strings.HasPrefix(o, s) {
			if found != "" && canonical(found) != canonical(o) {
				return "", false
			}
			found = o
		}
	}
	return canonical(found), found != ""
}

func canonical(o string) string {
	if a, ok := aliasOf[o]; ok {
		return a
	}
	return o
}

// opt is one option read from argv or a requirements file.
type opt struct {
	name, value string
	// at is the index of the argument that held the option's value, from
	// that of the option itself.
	at, from int
}

// parsed is a parsed argv: options in order, and positional arguments
// with their indexes.
type parsed struct {
	opts []opt
	args []string
	pos  []int
	// unknown are options pip does not know (pip refuses them).
	unknown []string
}

func (p *parsed) has(name string) bool {
	for _, o := range p.opts {
		if o.name == name {
			return true
		}
	}
	return false
}

func (p *parsed) values(name string) []string {
	var v []string
	for _, o := range p.opts {
		if o.name == name {
			v = append(v, o.value)
		}
	}
	return v
}

// parseArgs reads args as optparse does with pip's options, options
// anywhere unless interspersed is false (then the first positional
// argument ends them, as pip's main parser does).
func parseArgs(args []string, start int, interspersed bool) *parsed {
	p := &parsed{}
	for i := start; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for j := i + 1; j < len(args); j++ {
				p.args, p.pos = append(p.args, args[j]), append(p.pos, j)
			}
			return p
		case strings.HasPrefix(a, "--"):
			i = p.long(args, i)
		case len(a) > 1 && a[0] == '-':
			i = p.short(args, i)
		default:
			p.args, p.pos = append(p.args, a), append(p.pos, i)
			if !interspersed {
				return p
			}
		}
	}
	return p
}

func (p *parsed) long(args []string, i int) int {
	from := i
	name, val, hasVal := strings.Cut(args[i][2:], "=")
	full, ok := matchLong(name)
	if !ok {
		p.unknown = append(p.unknown, args[i])
		return i
	}
	if takesValue()[full] || takesValue()[name] {
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		p.opts = append(p.opts, opt{name: full, value: val, at: i, from: from})
		return i
	}
	p.opts = append(p.opts, opt{name: full, at: i, from: from})
	return i
}

func (p *parsed) short(args []string, i int) int {
	a, from := args[i], i
	for j := 1; j < len(a); j++ {
		name, ok := shortOpts[a[j]]
		if !ok {
			p.unknown = append(p.unknown, a)
			return i
		}
		if !takesValue()[name] {
			p.opts = append(p.opts, opt{name: name, at: i, from: from})
			continue
		}
		val := a[j+1:]
		if val == "" && i+1 < len(args) {
			i++
			val = args[i]
		}
		p.opts = append(p.opts, opt{name: name, value: val, at: i, from: from})
		return i
	}
	return i
}
