package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/release"
	"github.com/sandtrail/sandtrail/record/render"
)

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check, show and explain the policy that the mirror, the shims and the collector obey",
		Long: `The policy decides which packages may be installed (approved sources, a
blocklist, a release-age cooldown, install scripts), which connections and
file accesses are flagged or blocked, how much tool I/O is kept, and the
default resource limits. Without --policy the built-in default is used;
docs/policy.md documents every field.`,
	}
	cmd.AddCommand(newPolicyCheckCmd(), newPolicyShowCmd(), newPolicyExplainCmd(g))
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a policy file, listing every error with its line and field",
		Long: `check validates a policy file. It exits 0 when the file is valid, 4 when it
is invalid (listing every error as FILE:LINE: FIELD: MESSAGE), and 1 when it
cannot be read or on a usage error (docs/operations.md has the table every
command shares).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := policyCheckFormat(format); err != nil {
				return usageErr(err)
			}
			file := args[0]
			_, err := policies.Load(file)
			var fes policies.Errors
			if err != nil && !errors.As(err, &fes) {
				return usageErr(err)
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				if fes == nil {
					fes = policies.Errors{}
				}
				if err := policyWriteJSON(out, map[string]any{"file": file, "valid": len(fes) == 0, "errors": fes}); err != nil {
					return err
				}
			} else if len(fes) == 0 {
				fmt.Fprintf(out, "%s: valid\n", file)
			} else {
				for _, fe := range fes {
					fmt.Fprintln(out, fe.Error())
				}
			}
			if len(fes) > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%s: invalid policy (%d %s)", file, len(fes), policyPlural(len(fes), "error", "errors"))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func newPolicyShowCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the effective policy as YAML",
		Long: `show prints the effective policy: the file given with --policy, or the
built-in default, with every empty setting replaced by the value it stands
for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := policies.Load(file)
			if err != nil {
				return err
			}
			b, err := policies.Marshal(p.Effective())
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&file, "policy", "", "policy file (default: the built-in policy)")
	return cmd
}

// policyExplainFlags are the flags of policy explain.
type policyExplainFlags struct {
	file, source, registry, published, format string
	versions                                  []string
	scripts                                   bool
}

func newPolicyExplainCmd(g *globals) *cobra.Command {
	var f policyExplainFlags
	cmd := &cobra.Command{
		Use:   "explain ECOSYSTEM:NAME@SPEC",
		Short: "Resolve a package spec and show the policy's verdict and why",
		Long: `explain resolves SPEC to a version and shows what the policy decides about
it: the verdict (allow, flag or block), the reason, the deciding rule, and
the outcome of each check (blocklist, source, cooldown, install scripts).

The package is ECOSYSTEM:NAME@SPEC (npm:lodash@^4.17.0, pypi:requests@>=2,<3,
cargo:serde@1) or a purl (pkg:npm/%40scope/name@^1). SPEC is resolved among
--versions when given, and otherwise among the versions that the registry
lists: npm packuments, PyPI's JSON simple API, or the crates sparse index,
from --registry or the policy's first registry for the ecosystem. The
registry also supplies the publish time (unless --published is given), the
artifact URL that is checked as the source (unless --source is given) and
whether the package has install scripts.`,
		Example: `  sandtrail policy explain npm:lodash@^4.17.0
  sandtrail policy explain npm:left-pad@1.3.0 --source https://example.com/left-pad.tgz
  sandtrail policy explain pypi:requests@2.32.3 --versions 2.32.3 --published 2026-11-28T00:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyExplain(cmd, g, &f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.file, "policy", "", "policy file (default: the built-in policy)")
	fl.StringVar(&f.source, "source", "", "source URL to check (default: the artifact URL the registry names)")
	fl.StringVar(&f.registry, "registry", "", "registry to read versions from (default: the policy's first registry for the ecosystem)")
	fl.StringVar(&f.published, "published", "", "publish time, RFC 3339 (default: what the registry says)")
	fl.StringSliceVar(&f.versions, "versions", nil, "candidate versions, comma-separated, instead of asking the registry")
	fl.BoolVar(&f.scripts, "install-scripts", false, "whether the package runs install scripts (default: what the registry says)")
	fl.StringVar(&f.format, "format", "text", "output format: text or json")
	return cmd
}

// runPolicyExplain turns the flags into a policies.ExplainRequest, asks the
// engine, and prints the explanation.
func runPolicyExplain(cmd *cobra.Command, g *globals, f *policyExplainFlags, arg string) error {
	if err := policyCheckFormat(f.format); err != nil {
		return err
	}
	req, err := policyExplainRequest(cmd, f, arg)
	if err != nil {
		return err
	}
	p, err := policies.Load(f.file)
	if err != nil {
		return err
	}
	eng, err := policies.New(p)
	if err != nil {
		return err
	}
	var lister policies.Lister
	if req.Versions == nil {
		cfg, err := g.load()
		if err != nil {
			return err
		}
		lister = release.New(release.WithLogger(newLogger(cfg)))
	}
	res, err := eng.Explain(cmd.Context(), req, lister)
	if err != nil {
		return fmt.Errorf("explaining %s: %w", arg, err)
	}
	if f.format == "json" {
		return policyWriteJSON(cmd.OutOrStdout(), res)
	}
	return policyWriteExplain(cmd.OutOrStdout(), res)
}

// policyExplainRequest reads the package argument and the flags.
func policyExplainRequest(cmd *cobra.Command, f *policyExplainFlags, arg string) (policies.ExplainRequest, error) {
	eco, name, spec, err := policies.ParsePackageRef(arg)
	if err != nil {
		return policies.ExplainRequest{}, err
	}
	req := policies.ExplainRequest{Ecosystem: eco, Name: name, Spec: spec, Registry: f.registry, Source: f.source}
	if cmd.Flags().Changed("versions") {
		req.Versions = append([]string{}, f.versions...)
	}
	if f.published != "" {
		t, err := policyParseTime(f.published)
		if err != nil {
			return policies.ExplainRequest{}, fmt.Errorf("--published: %w", err)
		}
		req.Published = t
	}
	if cmd.Flags().Changed("install-scripts") {
		req.InstallScripts = &f.scripts
	}
	return req, nil
}

func policyWriteExplain(w io.Writer, r *policies.Explanation) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "package\t%s:%s@%s\n", r.Ecosystem, r.Name, r.Requested)
	if r.Unlisted {
		fmt.Fprintf(tw, "resolved\t%s (not among the %d %s listed)\n", r.Resolved, r.Candidates, policyPlural(r.Candidates, "version", "versions"))
	} else {
		fmt.Fprintf(tw, "resolved\t%s (among %d %s)\n", r.Resolved, r.Candidates, policyPlural(r.Candidates, "version", "versions"))
	}
	if r.Published != nil {
		fmt.Fprintf(tw, "published\t%s\n", r.Published.Format(time.RFC3339))
	} else {
		fmt.Fprintf(tw, "published\tunknown\n")
	}
	fmt.Fprintf(tw, "registry\t%s\n", render.OrDash(r.Registry))
	fmt.Fprintf(tw, "source\t%s\n", render.OrDash(r.Source))
	fmt.Fprintf(tw, "verdict\t%s\n", strings.ToUpper(string(r.Verdict)))
	fmt.Fprintf(tw, "reason\t%s\n", r.Reason)
	fmt.Fprintf(tw, "rule\t%s\n", render.OrDash(r.Rule))
	fmt.Fprintf(tw, "\nchecks\n")
	for _, c := range r.Checks {
		rule := ""
		if c.Rule != "" {
			rule = " [" + c.Rule + "]"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", c.Name, c.Verdict, c.Reason, rule)
	}
	return tw.Flush()
}

func policyParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time such as 2026-11-28T00:00:00Z", s)
}

func policyCheckFormat(f string) error {
	if f != "text" && f != "json" {
		return fmt.Errorf("--format %q: want text or json", f)
	}
	return nil
}

func policyWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func policyPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
