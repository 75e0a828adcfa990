package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/policies/sigma"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/render"
)

func newRulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules list|show|test|export",
		Short: "List, show, test and export the detection rules",
		Long: `rules works with the detection rules the daemon runs over the record: the
built-in ones (Sigma YAML shipped in the binary, SigmaHQ's three Linux rules
among them unchanged) and those the policy's detections.rules adds, less
detections.disable, at detections.levels (docs/detections.md).

  list     every rule: name, id, level, logsource, where it comes from; the
           package view's rules (Go, not Sigma) last, at their own levels
           unless the policy sets one
  show     one rule's YAML, by id or name
  test     run a rule file over events (JSON lines, as query --format jsonl
           prints them) and print what matches; exit code 7 when nothing does
  export   the rules as plain Sigma YAML, for a SIEM's own converters`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRulesListCmd(g), newRulesShowCmd(g), newRulesTestCmd(), newRulesExportCmd(g))
	return cmd
}

// ruleJSON is a rule in rules list --format json.
type ruleJSON struct {
	ID        string   `json:"id,omitempty"`
	Name      string   `json:"name,omitempty"`
	Title     string   `json:"title"`
	Level     string   `json:"level"`
	RuleLevel string   `json:"rule_level"`
	Status    string   `json:"status,omitempty"`
	Logsource string   `json:"logsource"`
	File      string   `json:"file"`
	Builtin   bool     `json:"builtin"`
	Disabled  bool     `json:"disabled"`
	Tags      []string `json:"tags,omitempty"`
}

func logsource(r *sigma.Rule) string {
	if r.Correlation != nil {
		return "correlation"
	}
	return r.Logsource.Product + "/" + r.Logsource.Category
}

func newRulesListCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list [--format table|json]",
		Short: "List the detection rules the policy runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			set, err := g.rules()
			if err != nil {
				return err
			}
			var out []ruleJSON
			for _, r := range set.Rules() {
				out = append(out, ruleJSON{ID: r.ID, Name: r.Name, Title: r.Title, Level: set.Level(r), RuleLevel: r.Level,
					Status: r.Status, Logsource: logsource(r), File: r.File, Builtin: set.Builtin(r), Disabled: set.Disabled(r), Tags: r.Tags})
			}
			for _, name := range pkgview.Rules {
				lv, off := set.ViewRule(name)
				out = append(out, ruleJSON{Name: name, Title: "(the package view's, in Go: docs/packages.md)", Level: render.OrDash(lv),
					Logsource: "package view", Builtin: true, Disabled: off})
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tLEVEL\tLOGSOURCE\tSTATE\tTITLE")
			for _, r := range out {
				state := "on"
				if r.Disabled {
					state = "disabled"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", render.OrDash(r.Name), render.OrDash(r.ID), r.Level, r.Logsource, state, render.Clean(r.Title, 80))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// rules loads g's config and the rules its policy runs.
func (g *globals) rules() (*rules.Set, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, usageErr(err)
	}
	set, err := loadRules(cfg.Policy)
	if err != nil {
		return nil, usageErr(err)
	}
	return set, nil
}

// ruleFile reads the file a rule was loaded from.
func ruleFile(r *sigma.Rule) ([]byte, error) {
	if name, ok := strings.CutPrefix(r.File, rules.BuiltinLabel); ok {
		return fs.ReadFile(rules.Builtin(), name)
	}
	return os.ReadFile(r.File)
}

func newRulesShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show RULE",
		Short:   "Print a rule's YAML (the file it is in), by id or name",
		Example: `  sandtrail rules show download_piped_to_shell`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := g.rules()
			if err != nil {
				return err
			}
			r := set.Find(args[0])
			if r == nil {
				return usageErr(fmt.Errorf("no rule has the id or name %q (sandtrail rules list)", args[0]))
			}
			b, err := ruleFile(r)
			if err != nil {
				return usageErr(fmt.Errorf("reading %s: %w", r.File, err))
			}
			state := "on"
			if set.Disabled(r) {
				state = "disabled by the policy"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# %s (%s), from %s\n# level %s, %s\n%s", r.Title, r.ID, r.File, set.Level(r), state, b)
			return nil
		},
	}
}

// matchJSON is a match in rules test --format json.
type matchJSON struct {
	Line    int      `json:"line"`
	Seq     uint64   `json:"seq"`
	RuleID  string   `json:"rule_id"`
	Title   string   `json:"title"`
	Level   string   `json:"level"`
	Refs    []uint64 `json:"refs"`
	Summary string   `json:"summary"`
}

func newRulesTestCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "test RULES.yml EVENTS.jsonl [--format table|json]",
		Short: "Run a rule file over events and print what matches",
		Long: `test loads the rules of RULES.yml (every load error is listed, naming the rule
and the field) and runs them, in order, over the events of EVENTS.jsonl: one
event a line, as sandtrail query --format jsonl prints them ("-" reads
standard input). It prints each match with the line of the event that
completed it. An event without a seq is given its line number.

Exit codes: 0 something matched, 7 nothing matched, 1 a file could not be
read or a rule does not load.`,
		Example: `  sandtrail query --session sess-42 --format jsonl > s.jsonl
  sandtrail rules test my-rule.yml s.jsonl`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			set, err := sigma.LoadFiles(args[0])
			if err != nil {
				return usageErr(err)
			}
			ms, err := testRules(set, args[1], cmd.InOrStdin())
			if err != nil {
				return usageErr(err)
			}
			if err := printMatches(cmd.OutOrStdout(), ms, format); err != nil {
				return err
			}
			if len(ms) == 0 {
				return &exitError{code: exitNoMatch, err: errors.New("no event matched")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// testRules runs set over the events of the file (stdin for "-").
func testRules(set *sigma.Set, file string, stdin io.Reader) ([]matchJSON, error) {
	in := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	ev := sigma.NewEvaluator(set)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out []matchJSON
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		e, err := event.Unmarshal(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, line, err)
		}
		if e.Seq == 0 {
			e.Seq = uint64(line)
		}
		for _, m := range ev.Observe(e) {
			out = append(out, matchJSON{Line: line, Seq: e.Seq, RuleID: m.RuleID, Title: m.Title, Level: m.Level,
				Refs: append([]uint64(nil), m.Seqs...), Summary: rules.Summary(e, m)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return out, nil
}

func printMatches(w io.Writer, ms []matchJSON, format string) error {
	if format == "json" {
		if ms == nil {
			ms = []matchJSON{}
		}
		return writeJSON(w, ms)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tSEQ\tLEVEL\tTITLE\tSUMMARY")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", m.Line, m.Seq, m.Level, render.Clean(m.Title, 60), render.Clean(m.Summary, 160))
	}
	return tw.Flush()
}

func newRulesExportCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "export [--dir DIR]",
		Short: "Write the rules as plain Sigma YAML",
		Long: `export writes every rule file the policy runs (built-in and detections.rules),
unchanged: to DIR, one file each (built-in ones under builtin/), or to standard
output as one YAML stream, documents separated by ---. sandtrail's own rules
use its logsource (product sandtrail) and field names (docs/sigma.md), which a
SIEM's converter maps with a pipeline of its own; SigmaHQ's are as SigmaHQ
ships them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := g.rules()
			if err != nil {
				return err
			}
			return exportRules(cmd.OutOrStdout(), set, dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "write the files here instead of to standard output")
	return cmd
}

func exportRules(w io.Writer, set *rules.Set, dir string) error {
	done := map[string]bool{}
	for _, r := range set.Rules() {
		if done[r.File] {
			continue
		}
		done[r.File] = true
		b, err := ruleFile(r)
		if err != nil {
			return usageErr(fmt.Errorf("reading %s: %w", r.File, err))
		}
		if dir == "" {
			if len(done) > 1 {
				io.WriteString(w, "---\n")
			}
			fmt.Fprintf(w, "# %s\n%s", r.File, strings.TrimPrefix(string(b), "---\n"))
			continue
		}
		name := filepath.Base(r.File)
		if n, ok := strings.CutPrefix(r.File, rules.BuiltinLabel); ok {
			name = filepath.Join("builtin", filepath.FromSlash(n))
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return usageErr(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return usageErr(err)
		}
	}
	return nil
}
