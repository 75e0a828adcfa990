package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
)

// doctorLong is doctor's help.
const doctorLong = `doctor checks, before anything runs, whether this machine can host sandtrail
sessions and what the record will lack on it. It loads nothing: it probes
the kernel for each capability of the kernel collector (as the collector
does when it starts, so it needs root) and prints:

  kernel        the release, and the capabilities the collector does
                without here (the same line as run's summary)
  capabilities  one row each: whether the kernel has it, whether the
                collector (yes) or the policy (policy) requires it, the
                oldest Linux that has it, and what was found or what the
                collector does instead
  policy        the policy's require list, and why each one missing is
                needed
  cgroups       pure v2 or hybrid (v1 controllers beside v2), and the
                cgroup that sessions are made beneath
  tracefs       where it is mounted (the collector mounts it itself when
                it is not)
  sock_diag     inet_diag, tcp_diag, udp_diag and unix_diag: loaded,
                built in, a module the kernel loads when first asked, or
                missing, and what each is for
  verdict       the nearest configuration in which sandtrail runs: "all
                required capabilities present: sandtrail runs with 2
                fallbacks (...)", or "needs Linux 5.17 (bpf_loop)"

The policy is --policy FILE, or the config key policy, or the embedded
default; its require list (require: [unix_enforce, clone3_kill]) makes
capabilities that the collector could do without required, as the daemon
and run then do at start. docs/kernels.md says what each capability is for
and which kernels have it.

Exit status: 0 when sandtrail runs here; 5 when the kernel lacks a
capability that the collector or the policy requires; 1 when the kernel
could not be probed (not root) or on a usage error (docs/operations.md
has the table every command shares). --format json prints
the same as one object (kernel, probe_error, require, unmet, nearest,
cgroups, tracefs, sock_diag), whatever the exit status.`

func newDoctorCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "doctor [--policy FILE] [--format table|json]",
		Short: "Check whether this kernel can run sandtrail, and what the record lacks on it",
		Long:  doctorLong,
		Example: `  sudo sandtrail doctor
  sudo sandtrail doctor --policy /etc/sandtrail/policy.yaml
  sudo sandtrail doctor --format json | jq .unmet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			// Bound here, as run binds it: mirror binds the policy key
			// to its own flag.
			g.bindFlag("policy", cmd.Flags().Lookup("policy"))
			cfg, err := g.load()
			if err != nil {
				return usageErr(err)
			}
			eng, err := daemon.LoadPolicy(cfg.Policy)
			if err != nil {
				return usageErr(err)
			}
			d := daemon.Diagnose(cfg.Policy, eng.Require())
			out := cmd.OutOrStdout()
			if format == "json" {
				err = writeJSON(out, d)
			} else {
				err = d.WriteTable(out)
			}
			if err != nil {
				return err
			}
			switch {
			case d.Kernel == nil:
				return &exitError{code: exitFailed, err: errors.New("doctor: " + d.Verdict())}
			case !d.OK():
				return &exitError{code: exitCannotRun, err: errors.New("doctor: sandtrail cannot run here: " + d.Verdict())}
			}
			return nil
		},
	}
	cmd.Flags().String("policy", "", "policy file whose require list to check (config key policy; default: the embedded policy)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}
