package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/policies/intel"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/resolver"
)

func newHuntCmd(g *globals) *cobra.Command {
	var since, format string
	cmd := &cobra.Command{
		Use:   "hunt [--since DUR|TIME] [--format table|json]",
		Short: "Find the sessions that installed a known-malicious package or contacted its indicators",
		Long: `hunt answers, over the index (caught up with the journal first), with the
records that sandtrail intel import stored:

  package  which sessions installed a listed name@version: a pkg.install, or a
           pkg.fetch the mirror served (one it refused installed nothing);
           versions compare with the ecosystem's own grammar, names as the
           ecosystem compares them
  hash     which pkg events carry an artifact hash a record's IOCs name
  domain   which sessions looked up or connected to a record's domain or a
           sub-domain of it (net.dns, net.connect)
  ip       which connected to a record's address
  url      which fetched a record's URL, or looked up or connected to its host

For each package match it shows what the package's install scripts did
(processes, sensitive files, connections), as sandtrail packages does.

It answers from the store as it is now: a withdrawn record matches nothing,
even where an earlier import raised an alert for it (the alert stays in the
journal; ALERTED says whether one was raised for a current match).

It exits 6 when it found a match, 0 when it found none.

Output (--format):
  table  one line per session, record and match, its events and scripts
         beneath (default)
  json   {findings: [...]}; each with session_id, advisory, match, package,
         ioc, seqs, kinds, first, last, alerted and scripts`,
		Example: `  sandtrail intel import /srv/malicious-packages
  sandtrail hunt
  sandtrail hunt --since 7d --format json | jq -r '.findings[].session_id' | sort -u`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			var from time.Time
			if since != "" {
				var err error
				if from, err = query.ParseTime(since, time.Now()); err != nil {
					return usageErr(fmt.Errorf("--since %w", err))
				}
			}
			return runHunt(cmd, g, from, format)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339, date, or 2h/7d before now)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// huntFinding is a finding as hunt prints it.
type huntFinding struct {
	intel.Finding
	// Alerted: a known_malicious alert of its session, record and package
	// is in the journal.
	Alerted bool `json:"alerted"`
	// Scripts is what the package's install scripts did, from the
	// session's package view (package and hash matches).
	Scripts *huntScripts `json:"scripts,omitempty"`
}

type huntScripts struct {
	Processes    []pkgview.Process `json:"processes"`
	Files        []pkgview.FileOp  `json:"files"`
	Connections  []pkgview.Conn    `json:"connections"`
	FilesOmitted int               `json:"files_omitted,omitempty"`
}

func runHunt(cmd *cobra.Command, g *globals, since time.Time, format string) error {
	ctx := cmd.Context()
	s, err := openIntelStore(g)
	if err != nil {
		return err
	}
	defer s.Close()
	cfg, ix, err := g.loadIndex(ctx)
	if err != nil {
		return err
	}
	defer ix.Close()
	fs, err := intel.Hunt(ctx, s, ix, since)
	if err != nil {
		return err
	}
	raised, err := intel.Raised(ctx, ix)
	if err != nil {
		return err
	}
	out, err := withScripts(ctx, ix, cfg.ShimDir, fs, raised)
	if err != nil {
		return err
	}
	if format == "json" {
		err = writeJSON(cmd.OutOrStdout(), struct {
			Findings []huntFinding `json:"findings"`
		}{out})
	} else {
		w := bufio.NewWriter(cmd.OutOrStdout())
		writeHunt(w, out)
		err = w.Flush()
	}
	if err == nil && len(out) > 0 {
		return &exitError{code: exitFound, err: fmt.Errorf("hunt: %d findings in %d sessions", len(out), countSessions(fs))}
	}
	return err
}

// withScripts joins each package or hash finding with what its package's
// install scripts did, from its session's package view (built once per
// session, as sandtrail packages builds it).
func withScripts(ctx context.Context, ix *index.Index, shimDir string, fs []intel.Finding, raised map[intel.AlertKey]bool) ([]huntFinding, error) {
	views := map[string]*pkgview.View{}
	out := make([]huntFinding, 0, len(fs))
	for _, f := range fs {
		hf := huntFinding{Finding: f, Alerted: raised[intel.AlertKey{SessionID: f.SessionID, Advisory: f.Advisory, Package: f.Package}]}
		if f.Match == intel.MatchPackage || f.Match == intel.MatchHash {
			v := views[f.SessionID]
			if v == nil {
				var err error
				if v, _, err = buildPackages(ctx, &ix.Reader, f.SessionID, shimDir); err != nil {
					return nil, err
				}
				views[f.SessionID] = v
			}
			hf.Scripts = scriptsOf(v, &f)
		}
		out = append(out, hf)
	}
	return out, nil
}

// scriptsOf gathers what the view's rows of f's package and version did.
func scriptsOf(v *pkgview.View, f *intel.Finding) *huntScripts {
	sc := &huntScripts{Processes: []pkgview.Process{}, Files: []pkgview.FileOp{}, Connections: []pkgview.Conn{}}
	for _, p := range v.Packages {
		if p.Ecosystem != f.Ecosystem || p.Version != f.Version || !sameName(p.Ecosystem, p.Name, f.Name) {
			continue
		}
		sc.Processes = append(sc.Processes, p.Processes...)
		sc.Files = append(sc.Files, p.Files...)
		sc.Connections = append(sc.Connections, p.Connections...)
		sc.FilesOmitted += p.FilesOmitted
	}
	return sc
}

func writeHunt(w io.Writer, fs []huntFinding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "(no session matches a stored record)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tADVISORY\tMATCH\tPACKAGE\tIOC\tEVENTS\tFIRST\tALERTED")
	for _, f := range fs {
		alerted := "no"
		if f.Alerted {
			alerted = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", render.Clean(f.SessionID, 64), render.Clean(f.Advisory, 64), f.Match,
			render.Clean(f.Package, 120), render.OrDash(render.Clean(f.IOC, 80)), len(f.Seqs), f.First.UTC().Format(time.RFC3339), alerted)
	}
	tw.Flush()
	for _, f := range fs {
		if f.Scripts == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s %s in %s: seqs %s\n", render.Clean(f.Advisory, 64), render.Clean(f.Package, 120), render.Clean(f.SessionID, 64),
			strings.Trim(fmt.Sprint(f.Seqs), "[]"))
		if len(f.Scripts.Processes) == 0 {
			fmt.Fprintln(w, "    no install-time activity recorded (code that runs only on import does nothing here)")
		}
		writeScripts(w, &pkgview.Package{Processes: f.Scripts.Processes, Files: f.Scripts.Files,
			Connections: f.Scripts.Connections, FilesOmitted: f.Scripts.FilesOmitted})
	}
}

// sameName reports whether a and b name one package, as eco compares names.
func sameName(eco, a, b string) bool {
	return resolver.NormalizeName(eco, a) == resolver.NormalizeName(eco, b)
}
