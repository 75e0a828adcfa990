// Package pip plans pip invocations for the shim (pip, pip3 and
// python -m pip): it reads pip's argv as pip 23's optparse does (long
// options and their unique prefixes, --opt=value, clustered short
// options, -ivalue), the requirements files it names, and PIP_* index
// variables, names the requirements asked for, and adds --report so that
// the read-back can parse pip's installation report.
//
// Trust model: argv, the requirements files and the environment are the
// agent's. Every pip install is planned, a -r file that cannot be read
// (or is at an http(s) URL, which the shim will not fetch) is an error,
// and an option the planner does not know never drops a requirement.
//
// Registries: every registry request has Registry set to the index in
// effect (the last --index-url of argv or the requirements files, else
// PIP_INDEX_URL unless it is the session's mirror). Each extra index and
// each --find-links location (from argv, a requirements file or
// PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS) is reported as a Request with no
// Name and Registry set to it, so that a policy can refuse an index it
// has not approved. pip's configuration files are not read.
//
// The report: the real install gets --report <TempDir>/pip-report.json
// right after "install". When the agent gave its own --report FILE,
// that file is read instead; with --report - (stdout) no second report
// can be added and Collect returns nothing. With --dry-run pip installs
// nothing, and Collect returns nothing. After a failed install the report
// (written after resolution) is still read back.
package pip

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

var _ shims.Planner = Plan

// Plan plans one pip invocation (args are what follows pip). It returns
// nil for a command other than install, and an error when a
// requirements file cannot be read.
func Plan(args []string, c shims.Context) (*shims.Plan, error) {
	general := parseArgs(args, 0, false)
	if len(general.args) == 0 || general.args[0] != "install" {
		return nil, nil
	}
	at := general.pos[0]
	rest := append(slices.Clone(args[:at]), args[at+1:]...)
	cmd := parseArgs(rest, 0, true)
	reqs, err := gather(cmd, c)
	if err != nil {
		return nil, err
	}
	p := &shims.Plan{Requests: reqs}
	report, own := "", cmd.values("report")
	switch {
	case len(own) > 0:
		report = own[len(own)-1]
		if report != "-" {
			report = absIn(c.Dir, report)
		} else {
			report = ""
		}
	case c.TempDir != "":
		report = filepath.Join(c.TempDir, "pip-report.json")
		p.Args = slices.Concat(args[:at+1], []string{"--report", report}, args[at+1:])
	}
	if report == "" || cmd.has("dry-run") {
		return p, nil
	}
	p.Collect = func(int) ([]shims.Package, error) {
		b, err := os.ReadFile(report)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the pip report: %w", err)
		}
		return ParseReport(b, reqs)
	}
	return p, nil
}

func absIn(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// gather reads the requests of an install's argv, its requirements
// files and the environment.
func gather(cmd *parsed, c shims.Context) ([]shims.Request, error) {
	getenv := c.Getenv
	if getenv == nil || cmd.has("isolated") {
		getenv = func(string) string { return "" }
	}
	rp := &reqParser{open: func(p string) ([]byte, error) { return readCapped(absIn(c.Dir, p)) }, getenv: getenv, seen: map[string]int{}}
	for _, v := range strings.Fields(getenv("PIP_INDEX_URL")) {
		if !isMirror(c, v) {
			rp.opts.IndexURL = v
		}
	}
	for _, env := range []string{"PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"} {
		for _, v := range strings.Fields(getenv(env)) {
			if !isMirror(c, v) {
				applyIndexOption(&rp.opts, opt{name: map[string]string{"PIP_EXTRA_INDEX_URL": "extra-index-url", "PIP_FIND_LINKS": "find-links"}[env], value: v}, "env "+env)
			}
		}
	}
	for _, env := range []string{"PIP_REQUIREMENT", "PIP_CONSTRAINT"} {
		for _, v := range strings.Fields(getenv(env)) {
			cmd.opts = append([]opt{{name: strings.ToLower(strings.TrimPrefix(env, "PIP_")), value: v}}, cmd.opts...)
		}
	}
	for _, o := range cmd.opts {
		if err := rp.option("", o, "argv", false, 0); err != nil {
			return nil, err
		}
	}
	for _, a := range cmd.args {
		r := parseRequirement(a)
		r.Origin = "argv"
		rp.reqs = append(rp.reqs, r)
	}
	return withRegistries(rp.reqs, rp.opts), nil
}

// withRegistries sets each registry request's Registry to the index in
// effect and adds one Request per extra index and find-links location.
func withRegistries(reqs []shims.Request, o Options) []shims.Request {
	var out []shims.Request
	for _, r := range reqs {
		if r.Source == "" && !o.NoIndex {
			r.Registry = o.IndexURL
		}
		out = append(out, r)
	}
	for _, l := range slices.Concat(o.ExtraIndexURLs, o.FindLinks) {
		out = append(out, shims.Request{Registry: l.Value, Origin: l.Origin})
	}
	return out
}

func isMirror(c shims.Context, u string) bool {
	return c.Mirror != "" && strings.HasPrefix(u, strings.TrimSuffix(c.Mirror, "/"))
}

// maxFile caps what the planner reads of a requirements file or report.
const maxFile = 64 << 20

func readCapped(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", name, maxFile)
	}
	return os.ReadFile(name)
}
