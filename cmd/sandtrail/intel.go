package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/policies/intel"
	"github.com/sandtrail/sandtrail/record/render"
)

func newIntelCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "intel",
		Short: "Import and read the known-malicious package records (OSV MAL- records)",
		Long: `intel keeps the OSV records of known-malicious packages (the MAL- records of
the OpenSSF malicious-packages project) in a store beside the index
(<data_dir>/intel.db, root's, 0600). sandtrail downloads nothing: import what
you fetched yourself, a checkout of github.com/ossf/malicious-packages or
osv.dev's per-ecosystem exports.

With records imported:
  - the mirror refuses the listed versions: it hides them from the metadata it
    serves and refuses their artifacts (rule known_malicious, the MAL id in
    the reason);
  - sandtrail hunt finds the past sessions that installed one, or contacted
    one of a record's indicators;
  - each import re-hunts the whole record and journals a known_malicious alert
    (level critical) in each matching session, once per session, record and
    package.

docs/intel.md says what is matched and how, and the limits.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newIntelImportCmd(g), newIntelListCmd(g), newIntelShowCmd(g))
	return cmd
}

func newIntelImportCmd(g *globals) *cobra.Command {
	var format string
	var noHunt bool
	cmd := &cobra.Command{
		Use:   "import PATH [--format text|json] [--no-hunt]",
		Short: "Import OSV MAL- records, then re-hunt the record for them",
		Long: `import reads the OSV records under PATH into the store:

  - a checkout of ossf/malicious-packages: every osv/malicious/<eco>/<name>/MAL-*.json;
    files under a withdrawn/ directory (osv/withdrawn/) remove their record;
  - an osv.dev export: <ECOSYSTEM>/all.zip, or a directory of them;
  - one record's .json file.

Only MAL- records of npm, PyPI, crates.io and Debian packages are kept;
MAL-0000-* staging files, other advisories (GHSA-, PYSEC-) and other
ecosystems are counted as skipped. A record replaces the stored record of its
id unless that one is newer; one with a withdrawn time removes it. Importing
the same files again changes nothing.

Then, unless --no-hunt, it re-hunts the index (caught up with the journal
first) and journals a known_malicious alert in each session that matches a
record, through the running daemon or, when none runs, into the journal
directly. An alert already raised for a session, record and package is not
raised again; a withdrawn record's old alert stays in the journal (it is
append-only), but hunt no longer reports the match.

It prints what it kept, withdrew and skipped, per ecosystem, and the re-hunt's
findings and alerts.`,
		Example: `  git clone --depth 1 https://github.com/ossf/malicious-packages /srv/mal
  sandtrail intel import /srv/mal
  # osv.dev's exports, fetched as osv-scanner keeps them
  sandtrail intel import ~/.cache/osv-scanner   # npm/all.zip, PyPI/all.zip, ...
  sandtrail intel import /srv/mal --format json | jq .counts.ecosystems`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			return runIntelImport(cmd, g, args[0], format, noHunt)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&noHunt, "no-hunt", false, "import only; do not re-hunt the record")
	return cmd
}

// importResult is what import prints.
type importResult struct {
	Store  string       `json:"store"`
	Counts intel.Counts `json:"counts"`
	Rehunt *rehunt      `json:"rehunt,omitempty"`
}

// rehunt is what the re-hunt after an import found and raised.
type rehunt struct {
	Findings int `json:"findings"`
	Sessions int `json:"sessions"`
	// Alerts counts the alerts raised now; Via says where they went
	// (daemon, journal).
	Alerts int    `json:"alerts"`
	Via    string `json:"via,omitempty"`
}

func runIntelImport(cmd *cobra.Command, g *globals, path, format string, noHunt bool) error {
	ctx := cmd.Context()
	cfg, err := g.load()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return usageErr(fmt.Errorf("intel import: %w", err))
	}
	s, err := daemon.OpenIntel(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := s.Import(ctx, path)
	if err != nil {
		return err
	}
	res := importResult{Store: s.Path(), Counts: c}
	if !noHunt {
		if res.Rehunt, err = runRehunt(ctx, g, cfg, s); err != nil {
			return err
		}
	}
	if format == "json" {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	writeImport(cmd.OutOrStdout(), res)
	return nil
}

// runRehunt hunts the whole record with s and journals the alerts not
// raised yet. Without a journal there is nothing to hunt.
func runRehunt(ctx context.Context, g *globals, cfg *Config, s *intel.Store) (*rehunt, error) {
	if _, err := os.Stat(cfg.JournalDir()); errors.Is(err, fs.ErrNotExist) {
		return &rehunt{}, nil
	}
	log := newLogger(cfg)
	ix, err := openIndex(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	fs, err := intel.Hunt(ctx, s, ix, time.Time{})
	if err != nil {
		return nil, err
	}
	raised, err := intel.Raised(ctx, ix)
	if err != nil {
		return nil, err
	}
	alerts := intel.Alerts(fs, raised, time.Now())
	r := &rehunt{Findings: len(fs), Sessions: countSessions(fs), Alerts: len(alerts)}
	if r.Via, err = daemon.RaiseAlerts(ctx, cfg, alerts, log); err != nil {
		return nil, fmt.Errorf("raising %d known_malicious alerts: %w", len(alerts), err)
	}
	return r, nil
}

func countSessions(fs []intel.Finding) int {
	seen := map[string]bool{}
	for _, f := range fs {
		seen[f.SessionID] = true
	}
	return len(seen)
}

func writeImport(w io.Writer, r importResult) {
	c := r.Counts
	fmt.Fprintf(w, "imported into %s: %d kept (%d unchanged), %d withdrawn (%d removed), %d skipped\n",
		render.Clean(r.Store, 200), c.Kept, c.Unchanged, c.Withdrawn, c.Removed, c.Skipped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ECOSYSTEM\tKEPT\tWITHDRAWN")
	for _, e := range slices.Sorted(maps.Keys(c.Ecosystems)) {
		fmt.Fprintf(tw, "  %s\t%d\t%d\n", e, c.Ecosystems[e].Kept, c.Ecosystems[e].Withdrawn)
	}
	tw.Flush()
	if len(c.SkippedBy) > 0 {
		var why []string
		for _, k := range slices.Sorted(maps.Keys(c.SkippedBy)) {
			why = append(why, fmt.Sprintf("%s %d", render.Clean(k, 64), c.SkippedBy[k]))
		}
		fmt.Fprintf(w, "  skipped: %s\n", strings.Join(why, ", "))
	}
	for _, e := range c.Errors {
		fmt.Fprintf(w, "  error: %s\n", render.Clean(e, 300))
	}
	if h := r.Rehunt; h != nil {
		fmt.Fprintf(w, "re-hunt: %d findings in %d sessions; %d known_malicious alerts raised", h.Findings, h.Sessions, h.Alerts)
		if h.Via != "" {
			fmt.Fprintf(w, " (through the %s)", h.Via)
		}
		fmt.Fprintln(w, "; sandtrail hunt lists them")
	}
}

func newIntelListCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list [--format table|json]",
		Short: "List the stored records: id, modified, packages, summary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			s, err := openIntelStore(g)
			if err != nil {
				return err
			}
			defer s.Close()
			rs, err := s.Records(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				if rs == nil {
					rs = []intel.Record{}
				}
				return writeJSON(cmd.OutOrStdout(), rs)
			}
			writeRecords(cmd.OutOrStdout(), rs)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func newIntelShowCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "show ID [--format text|json]",
		Short: "Show one stored record: its packages and versions, origins and indicators",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			s, err := openIntelStore(g)
			if err != nil {
				return err
			}
			defer s.Close()
			r, ok, err := s.Record(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !ok {
				return usageErr(fmt.Errorf("intel show: no record %q in %s", render.Clean(args[0], 64), s.Path()))
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			writeRecord(cmd.OutOrStdout(), &r)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// openIntelStore opens the store of g's config, which must exist: reading
// commands do not create it.
func openIntelStore(g *globals) (*intel.Store, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.IntelPath()); errors.Is(err, fs.ErrNotExist) {
		return nil, usageErr(fmt.Errorf("no intel store at %s: import records first (sandtrail intel import PATH)", cfg.IntelPath()))
	}
	return daemon.OpenIntel(cfg)
}

func writeRecords(w io.Writer, rs []intel.Record) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODIFIED\tPACKAGES\tSUMMARY")
	for _, r := range rs {
		var pkgs []string
		for _, a := range r.Affected {
			pkgs = append(pkgs, a.Purl(""))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", render.Clean(r.ID, 64), r.Modified.Format("2006-01-02"),
			render.Clean(strings.Join(pkgs, ","), 120), render.Clean(r.Summary, 100))
	}
	tw.Flush()
	if len(rs) == 0 {
		fmt.Fprintln(w, "(no records)")
	}
}

func writeRecord(w io.Writer, r *intel.Record) {
	fmt.Fprintf(w, "%s  modified %s\n", render.Clean(r.ID, 64), r.Modified.Format(time.RFC3339))
	if r.Summary != "" {
		fmt.Fprintf(w, "  %s\n", render.Clean(r.Summary, 300))
	}
	for _, a := range r.Affected {
		which := "every version"
		if !a.Every() {
			var parts []string
			if len(a.Versions) > 0 {
				parts = append(parts, "versions "+strings.Join(a.Versions, ", "))
			}
			for _, rg := range a.Ranges {
				parts = append(parts, rangeText(rg))
			}
			which = strings.Join(parts, "; ")
		}
		fmt.Fprintf(w, "  package %s: %s\n", render.Clean(a.Purl(""), 200), render.Clean(which, 600))
	}
	for _, o := range r.Origins {
		fmt.Fprintf(w, "  origin %s %s %s\n", render.Clean(o.Source, 64), render.Clean(o.ID, 64), render.Clean(o.ImportTime, 40))
	}
	for _, list := range []struct {
		kind   string
		values []string
	}{{"domain", r.IOCs.Domains}, {"url", r.IOCs.URLs}, {"ip", r.IOCs.IPs}, {"sha256", r.IOCs.SHA256}} {
		for _, v := range list.values {
			fmt.Fprintf(w, "  ioc %s %s\n", list.kind, render.Clean(v, 300))
		}
	}
}

// rangeText writes a range's events as OSV names them.
func rangeText(rg intel.Range) string {
	var ev []string
	for _, e := range rg.Events {
		switch {
		case e.Introduced != "":
			ev = append(ev, "introduced "+e.Introduced)
		case e.Fixed != "":
			ev = append(ev, "fixed "+e.Fixed)
		case e.LastAffected != "":
			ev = append(ev, "last_affected "+e.LastAffected)
		default:
			ev = append(ev, "limit "+e.Limit)
		}
	}
	return rg.Type + " " + strings.Join(ev, ", ")
}
