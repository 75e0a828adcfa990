// Package pip plans pip invocations for the shim (pip, pip3 and
// python -m pip): it reads pip's argv as pip 23's optparse does (long
// options and their unique prefixes, --opt=value, clustered short
// options, -ivalue), pip's configuration (its pip.conf files and the
// PIP_<OPTION> variables) and the requirements files they name, names
// the requirements asked for, and has install write its installation
// report to a file of the shim's for the read-back.
//
// Trust model: argv, the requirements files, the configuration files and
// the environment are the agent's. Every pip install, download and wheel
// (which fetch and build, running setup.py) is planned; a -r file that
// cannot be read (or is at an http(s) URL, which the shim will not fetch)
// is an error, and so is a requirements or configuration file that is
// not a regular file (a FIFO could answer the planner and pip
// differently) or a pip.conf that Python's configparser would refuse. An
// option the planner does not know never drops a requirement.
//
// Configuration: pip.conf files are read in pip's order, the last
// winning per key: $XDG_CONFIG_DIRS/pip/pip.conf and /etc/pip.conf, the
// user's ~/.pip/pip.conf and $XDG_CONFIG_HOME/pip/pip.conf (not under the
// literal --isolated, nor when PIP_CONFIG_FILE names a file that exists),
// $VIRTUAL_ENV/pip.conf and PIP_CONFIG_FILE (/dev/null: no files). Their
// [global] section, then the command's ([install], [download], [wheel]),
// then the PIP_<OPTION> variables (not under --isolated) give the
// defaults of index-url (pypi-url), extra-index-url, find-links,
// no-index, editable, requirement, constraint and report, which argv
// overrides (index-url, report) or adds to (the others), as pip does.
// Limits: the site file of a Python outside a virtualenv (sys.prefix) is
// not known to the planner and not read; pypi-url and index-url in one
// section are read as one key, the later line winning; and a planner
// cannot list the environment, so a PIP_ variable is read under the
// spellings PIP_INDEX_URL, PIP_index_url, PIP_index-url and
// PIP_INDEX-URL only (two that disagree are an error), not mixed case.
//
// Registries: every registry request has Registry set to the index in
// effect (the last --index-url of the configuration, argv or the
// requirements files, unless it is the session's mirror). Each extra
// index and each --find-links location is reported as a Request with no
// Name and Registry set to it, so that a policy can refuse an index it
// has not approved.
//
// The report: the real install always gets --report <TempDir>/pip-report.json
// right after "install", and the agent's own --report options are
// removed from argv. Collect, after pip exited, copies the report to
// where the agent asked (its --report, else report= of the
// configuration or PIP_REPORT): a file is written as pip writes it, and
// for "-" the JSON and a newline go to stdout, which is byte-identical to
// pip's print_json output. The trade-off: pip 23 prints that report
// after resolving and before installing, so with --report - the report
// now comes after pip's own later output (for a quiet or --dry-run run
// there is none, and stdout is identical), and an agent's report path
// that pip could not have written no longer stops the install before it
// starts (Collect returns the error). With --dry-run pip installs
// nothing, and Collect copies the report and returns nothing. After a
// failed install the report (written after resolution) is still read
// back.
package pip

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

var _ shims.Planner = Plan

// stdout is where Collect writes a report the agent asked for on stdout.
var stdout io.Writer = os.Stdout

// Plan plans one pip invocation (args are what follows pip). It returns
// nil for a command other than install, download and wheel, and an error
// when a requirements or configuration file cannot be read.
func Plan(args []string, c shims.Context) (*shims.Plan, error) {
	general := parseArgs(args, 0, false)
	if len(general.args) == 0 {
		return nil, nil
	}
	name := general.args[0]
	if name != "install" && name != "download" && name != "wheel" {
		return nil, nil
	}
	at := general.pos[0]
	rest := append(slices.Clone(args[:at]), args[at+1:]...)
	cmd := parseArgs(rest, 0, true)
	// pip skips the user's files and the environment only for the
	// literal --isolated (commands/__init__.py), not an abbreviation.
	isolated := slices.Contains(rest, "--isolated")
	defaults, origins, err := configured(name, c, isolated)
	if err != nil {
		return nil, err
	}
	reqs, err := gather(cmd, defaults, origins, c)
	if err != nil {
		return nil, err
	}
	p := &shims.Plan{Requests: reqs}
	if name != "install" || c.TempDir == "" {
		// download and wheel fetch and build but install nothing: the
		// requests are checked, nothing is read back.
		return p, nil
	}
	dest := "" // where the agent asked for the report: argv, else the configuration
	for _, o := range defaults {
		if o.name == "report" {
			dest = o.value
		}
	}
	if own := cmd.values("report"); len(own) > 0 {
		dest = own[len(own)-1]
	}
	report := filepath.Join(c.TempDir, "pip-report.json")
	p.Args = withReport(args, at, rest, cmd, report)
	dryRun := cmd.has("dry-run")
	p.Collect = func(int) ([]shims.Package, error) {
		b, err := os.ReadFile(report)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the pip report: %w", err)
		}
		if err := copyReport(b, dest, c.Dir); err != nil {
			return nil, err
		}
		if dryRun {
			return nil, nil
		}
		return ParseReport(b, reqs)
	}
	return p, nil
}

// withReport is args with the agent's --report options removed and
// --report file added after the command.
func withReport(args []string, at int, rest []string, cmd *parsed, file string) []string {
	drop := map[int]bool{}
	for _, o := range cmd.opts {
		if o.name == "report" {
			for i := o.from; i <= o.at; i++ {
				drop[i] = true
			}
		}
	}
	var kept []string
	for i, a := range rest {
		if !drop[i] {
			kept = append(kept, a)
		}
	}
	return slices.Concat(kept[:at], []string{args[at], "--report", file}, kept[at:])
}

// copyReport gives the agent the report where it asked for it: to
// stdout for "-", as pip's print_json writes it (the file's JSON and a
// newline), else to the file.
func copyReport(b []byte, dest, dir string) error {
	switch dest {
	case "":
		return nil
	case "-":
		_, err := stdout.Write(append(slices.Clip(b), '\n'))
		return err
	}
	if err := os.WriteFile(absIn(dir, dest), b, 0o666); err != nil {
		return fmt.Errorf("copying the pip report: %w", err)
	}
	return nil
}

func absIn(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// gather reads the requests of a command's configured defaults (each
// with its origin), argv and its requirements files. Requirements files
// expand ${VAR} from the environment even under --isolated, as pip does.
func gather(cmd *parsed, defaults []opt, origins []string, c shims.Context) ([]shims.Request, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	rp := &reqParser{open: func(p string) ([]byte, error) { return readCapped(absIn(c.Dir, p)) }, getenv: getenv, seen: map[string]int{}}
	for i, o := range defaults {
		switch o.name {
		case "index-url", "extra-index-url", "find-links":
			if isMirror(c, o.value) {
				continue
			}
		case "report":
			continue
		}
		if err := rp.option("", o, origins[i], false, 0); err != nil {
			return nil, err
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

// ErrNotRegular is shims.ErrNotRegular, for errors.Is.
var ErrNotRegular = shims.ErrNotRegular

// readCapped reads a regular file of at most maxFile bytes (shims.ReadFile).
func readCapped(name string) ([]byte, error) { return shims.ReadFile(name, maxFile) }

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
