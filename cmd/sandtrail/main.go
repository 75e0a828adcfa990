// Command sandtrail records, and can enforce, what an AI agent installs and
// does inside a sandbox session. It is the CLI for security teams (query,
// sessions, timeline, packages, verify, prove) and the daemon that hosts the
// collector, the ingest socket, the mirror and the sinks.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// commands is the one ordered list of subcommands.
var commands = []func(*globals) *cobra.Command{
	newRunCmd,
	newDaemonCmd,
	newMirrorCmd,
	newSessionCmd,
	newQueryCmd,
	newExportCmd,
	newStatusCmd,
	newSessionsCmd,
	newTimelineCmd,
	newReportCmd,
	newPackagesCmd,
	newAlertsCmd,
	newRulesCmd,
	newHuntCmd,
	newIntelCmd,
	newVerifyCmd,
	newProveCmd,
	newArchiveCmd,
	newAggregateCmd,
	newReindexCmd,
	newRetentionCmd,
	newHoldCmd,
	newInvestigateCmd,
	newAPICmd,
	newMCPProxyCmd,
	newPolicyCmd,
	newDoctorCmd,
	newEmitCmd,
	newKeysCmd,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err))
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "sandtrail",
		Short: "Record, and enforce, what an AI agent installs and does in a sandbox",
		Long: `sandtrail records what an AI agent does inside a sandbox session: the
packages it installs (requested spec, resolved version, source URL, artifact
hash), the processes it runs, the files it touches and the network it uses.
The record is a tamper-evident journal with signed checkpoints, indexed for
the incident questions.

Configuration precedence: flags > SANDTRAIL_* environment > config file >
built-in defaults.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.bind(root)
	for _, c := range commands {
		root.AddCommand(c(g))
	}
	return root
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps a command's error to the process exit code, printing it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(os.Stderr, "sandtrail:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "sandtrail:", err)
	return 1
}
