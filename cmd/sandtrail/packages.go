package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ocsf"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/resolver"
)

// packagesFlags are the flags of sandtrail packages.
type packagesFlags struct {
	session, ecosystem, name, seen, format string
}

func newPackagesCmd(g *globals) *cobra.Command {
	var fl packagesFlags
	cmd := &cobra.Command{
		Use:   "packages [--session ID] [--ecosystem E] [--name N] [--seen S] [--format table|json|cyclonedx|ocsf]",
		Short: "List a session's packages: what the shim claimed, what the mirror served, what their scripts did",
		Long: `packages joins one session's package events into one row per package
(ecosystem, name and version):

  - the shim's pkg.install (requested spec, resolved version, source URL,
    hash, direct or requested_by, the manager's pid) with the mirror's
    pkg.fetch of the same version (the upstream URL, the served hash,
    whether it was verified, the outcome);
  - refused requests (pkg.blocked) as rows of their own;
  - under each package, the processes its install or build scripts started
    (npm lifecycle scripts, cargo build scripts, pip sdist builds, dpkg
    maintainer scripts), the sensitive files they touched and their
    connections, from the kernel's record.

SEEN says which sources account for a package:
  shim+mirror   the shim claimed it and the mirror saw its fetch
  mirror_only   the mirror served (or refused) it and no shim claimed it
  shim_only     the shim claimed it and the mirror never served it
  blocked       the policy refused the request before the manager ran
  kernel_only   only a script process names it
  bundled       the shim claimed a copy that came inside another package's
                artifact (bundled_in); verified through that carrier's fetch

It also runs three rules and prints their alerts:
  shim_mirror_mismatch  the shim claims a hash the mirror did not serve for
                        that version, a version the mirror refused, or a
                        version the mirror never served while it served
                        others of the name
  shim_bypass           a real package manager (npm, pip, python -m pip,
                        cargo, apt, dpkg, pnpm, yarn, corepack) ran with no
                        shim above it: by its name or argv, or by its core
                        modules read (npm's lib/cli.js, pip's _internal/cli/)
  unverified_install    the shim says a package was installed that no
                        verified fetch of the mirror in the session matches

Without --session, the newest session with package events is shown (the
newest session at all if none has any), and its id is printed on stderr.
The index is caught up with the journal first.

Output (--format):
  table      one line per package, its scripts indented beneath (default)
  json       the view: {session_id, packages: [...], alerts: [...]};
             docs/packages.md lists the fields
  cyclonedx  a CycloneDX 1.6 JSON bill of materials of the packages the
             session got (not blocked requests nor refused fetches)
  ocsf       the same packages as one OCSF 1.8.0 Software Inventory Info
             event (class 5020: an sbom of software components), for a
             SIEM (docs/ocsf.md)

` + storeHelp + ``,
		Example: `  # the newest session's packages and what their install scripts did
  sandtrail packages
  # one session's npm packages that only the shim claims
  sandtrail packages --session sess-42 --ecosystem npm --seen shim_only
  # every version of one package (names compare as the ecosystem does)
  sandtrail packages --session sess-42 --ecosystem pypi --name Requests_OAuthlib
  # the alerts, for a script
  sandtrail packages --session sess-42 --format json | jq '.alerts[].alert'
  # an SBOM of what the session installed
  sandtrail packages --session sess-42 --format cyclonedx > sess-42.cdx.json
  # the same list as an OCSF event
  sandtrail packages --session sess-42 --format ocsf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPackages(cmd, g, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.session, "session", "", "the session (default: the newest with package events)")
	f.StringVar(&fl.ecosystem, "ecosystem", "", "only this ecosystem: "+strings.Join(resolver.Names(), ", "))
	f.StringVar(&fl.name, "name", "", "only packages of this name (compared as the ecosystem compares names)")
	f.StringVar(&fl.seen, "seen", "", "only rows seen so: "+strings.Join(pkgview.Seens, ", "))
	f.StringVar(&fl.format, "format", "table", "output format: table, json, cyclonedx or ocsf")
	storeFlag(g, cmd)
	return cmd
}

func runPackages(cmd *cobra.Command, g *globals, fl packagesFlags) error {
	if err := checkFormat(fl.format, "table", "json", "cyclonedx", "ocsf"); err != nil {
		return err
	}
	if fl.ecosystem != "" && !resolver.Known(fl.ecosystem) {
		return usageErr(fmt.Errorf("--ecosystem %q: want one of %s", render.Clean(fl.ecosystem, 32), strings.Join(resolver.Names(), ", ")))
	}
	if fl.seen != "" && !slices.Contains(pkgview.Seens, fl.seen) {
		return usageErr(fmt.Errorf("--seen %q: want one of %s", render.Clean(fl.seen, 32), strings.Join(pkgview.Seens, ", ")))
	}
	id := fl.session
	if id != "" {
		var err error
		if id, err = query.ParseSession(id); err != nil {
			return usageErr(err)
		}
	}
	ctx := cmd.Context()
	cfg, ix, err := g.loadStore(ctx)
	if err != nil {
		return err
	}
	defer ix.Close()
	if id == "" {
		if id, err = newestSession(ctx, ix.Reader); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "session %s (the newest; --session chooses)\n", render.Clean(id, 128))
	}
	v, n, err := buildPackages(ctx, ix.Reader, id, cfg.ShimDir)
	if err != nil {
		return err
	}
	if n == 0 {
		return usageErr(fmt.Errorf("no events recorded for session %q", id))
	}
	v.Packages = slices.DeleteFunc(v.Packages, func(p *pkgview.Package) bool { return !fl.keep(p) })
	if fl.format == "ocsf" {
		return writeJSON(cmd.OutOrStdout(), ocsf.SoftwareInventory(pkgview.Inventory(v, cfg.Host), ocsf.Sandtrail()))
	}
	return writePackages(cmd.OutOrStdout(), v, fl.format)
}

// keep reports whether a row passes the --ecosystem, --name and --seen
// filters.
func (fl packagesFlags) keep(p *pkgview.Package) bool {
	if fl.ecosystem != "" && p.Ecosystem != fl.ecosystem {
		return false
	}
	if fl.name != "" && resolver.NormalizeName(p.Ecosystem, p.Name) != resolver.NormalizeName(p.Ecosystem, fl.name) {
		return false
	}
	return fl.seen == "" || p.Seen == fl.seen
}

// newestSession is the session that began last among those with pkg
// events, or among all when none has any.
func newestSession(ctx context.Context, ix *index.Reader) (string, error) {
	pkg, err := query.ParseKinds("pkg")
	if err != nil {
		return "", err
	}
	for _, f := range []query.Filter{{Kinds: pkg}, {}} {
		if id, err := ix.NewestSession(ctx, f); err != nil || id != "" {
			return id, err
		}
	}
	return "", usageErr(fmt.Errorf("no sessions recorded"))
}

// packagesKinds are the kinds the view reads (net.dns: the raw-address rule
// asks which addresses the session's lookups named).
const packagesKinds = "process,file,net.connect,net.send,net.dns,pkg"

// buildPackages reads the session's events from the index and builds its
// view, with the shims of shimDir (the configured shim_dir, as the daemon's
// live rules have it) and the host's bundled wheels; n counts the events
// read.
func buildPackages(ctx context.Context, ix *index.Reader, id, shimDir string) (v *pkgview.View, n int, err error) {
	kinds, err := query.ParseKinds(packagesKinds)
	if err != nil {
		return nil, 0, err
	}
	b := pkgview.New(viewOptions(shimDir)...)
	err = ix.EachEvent(ctx, query.Filter{Session: id, Kinds: kinds}, func(e *event.Event) error {
		b.Add(e)
		n++
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading session %s: %w", id, err)
	}
	return b.View(), n, nil
}

// viewOptions are the package view's options, as the daemon's live rules
// have them: the shims of shimDir (the configured shim_dir) and the host's
// bundled wheels.
func viewOptions(shimDir string) []pkgview.Option {
	return []pkgview.Option{pkgview.WithShimDir(shimDir), pkgview.WithSystemWheels(daemon.SystemWheels(daemon.WheelDirs...)...)}
}

func writePackages(out io.Writer, v *pkgview.View, format string) error {
	switch format {
	case "json":
		return writeJSON(out, v)
	case "cyclonedx":
		b, err := pkgview.CycloneDX(v, v.SessionID)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	w := bufio.NewWriter(out)
	writePackagesTable(w, v)
	return w.Flush()
}

// writePackagesTable prints one aligned line per package, its script
// processes, sensitive files and connections indented beneath, then the
// alerts.
func writePackagesTable(w io.Writer, v *pkgview.View) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ECOSYSTEM\tNAME\tREQUESTED\tRESOLVED\tSEEN\tVERIFIED\tHASH\tPID\tTIME\tALERTS")
	for _, p := range v.Packages {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", render.Clean(p.Ecosystem, 8), render.Clean(p.Name, 64),
			render.OrDash(render.Clean(p.Requested, 32)), render.OrDash(render.Clean(p.Version, 32)), p.Seen, verified(p), render.OrDash(shortHash(p)),
			render.OrDash(pidOf(p.Pid)), p.Time.UTC().Format("15:04:05.000Z"), render.OrDash(strings.Join(p.Alerts, ",")))
	}
	tw.Flush()
	lines := strings.SplitAfter(buf.String(), "\n")
	io.WriteString(w, lines[0])
	for i, p := range v.Packages {
		io.WriteString(w, lines[i+1])
		writeScripts(w, p)
	}
	if len(v.Packages) == 0 {
		fmt.Fprintln(w, "(no packages)")
	}
	if len(v.Alerts) > 0 {
		fmt.Fprintln(w, "\nalerts")
	}
	for _, a := range v.Alerts {
		fmt.Fprintf(w, "  %s  %s  %s  %s (refs %s)\n", a.TS.UTC().Format("15:04:05.000Z"), a.Alert.RuleID, a.Alert.Level,
			render.Clean(a.Alert.Summary, 600), strings.Trim(fmt.Sprint(a.Alert.Refs), "[]"))
	}
}

// writeScripts prints what a package's scripts did, indented, after the
// carrier of a bundled copy.
func writeScripts(w io.Writer, p *pkgview.Package) {
	if p.BundledIn != "" {
		fmt.Fprintf(w, "    bundled in %s at %s\n", render.Clean(p.BundledIn, 200), render.Clean(strings.Join(p.Paths, ", "), 300))
	}
	if p.Rule != "" || p.Reason != "" {
		what := "refused"
		if p.Seen != pkgview.SeenBlocked {
			what = "mirror: " + render.Clean(p.Outcome, 24)
		}
		fmt.Fprintf(w, "    %s by %s: %s\n", what, render.OrDash(render.Clean(p.Rule, 64)), render.Clean(p.Reason, 300))
	}
	for _, pr := range p.Processes {
		fmt.Fprintf(w, "    process %d %s  cwd=%s  (%s)\n", pr.Pid, render.ShellJoin(pr.Argv, 160),
			render.Clean(pr.Cwd, 100), pr.Match)
	}
	for _, f := range p.Files {
		if f.Sensitive {
			fmt.Fprintf(w, "    sensitive %s %s  pid %d\n", f.Op, render.Clean(f.Path, 200), f.Pid)
		}
	}
	for _, c := range p.Connections {
		dst := render.HostPort(c.DstIP, c.DstPort)
		if c.Domain != "" {
			dst += " (" + render.Clean(c.Domain, 100) + ")"
		}
		fmt.Fprintf(w, "    %s %s %s  pid %d\n", c.Op, dst, render.OrDash(c.Verdict), c.Pid)
	}
	switch n := len(p.Files) + p.FilesOmitted; {
	case n == 1:
		fmt.Fprintln(w, "    1 file event (--format json lists it)")
	case n > 1:
		fmt.Fprintf(w, "    %d file events (--format json lists them)\n", n)
	}
}

func verified(p *pkgview.Package) string {
	switch {
	case p.Verified == nil:
		return "-"
	case *p.Verified:
		return "yes"
	}
	return "no"
}

// shortHash is the row's hash (the mirror's when it has one) shortened.
func shortHash(p *pkgview.Package) string {
	h := p.MirrorHash
	if h == "" {
		h = p.Hash
	}
	if len(h) > 20 {
		h = h[:20] + "…"
	}
	return render.Clean(h, 24)
}

func pidOf(pid int32) string {
	if pid == 0 {
		return ""
	}
	return fmt.Sprint(pid)
}
