package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon/api"
)

func newAPICmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Manage the tool API's access (docs/agents.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newAPITokenCmd(g))
	return cmd
}

func newAPITokenCmd(g *globals) *cobra.Command {
	var scope, name string
	cmd := &cobra.Command{
		Use:   "token --scope SESSION|'*' [--name NAME]",
		Short: "Make a bearer token for the tool API's TCP listener",
		Long: `token makes a random bearer token for the tool API's TCP listener
(api.listen), adds its sha256 and scope to the tokens file (api.tokens_file,
default <data_dir>/api-tokens, 0600) and prints the token once: the file keeps
only its hash. The daemon reads the file again whenever it changes; delete a
line to revoke its token.

A token scoped to a session may post tool and model events to that session
and read its facts. A '*' token may name any session and read the event
stream, as root may on the unix socket: give it to orchestrators and
investigators, never to an agent. A client of this host that the kernel places in
a session is held to that session whatever its token says.`,
		Example: `  sandtrail api token --scope sess-7f3a --name orchestrator
  sandtrail api token --scope '*' --name soc-reader`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return usageErr(err)
			}
			tok, line, err := api.NewToken(scope, name)
			if err != nil {
				return usageErr(fmt.Errorf("api token: %w", err))
			}
			path := cfg.APITokensFile()
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return usageErr(fmt.Errorf("api token: %w", err))
			}
			if _, err := fmt.Fprintln(f, line); err != nil {
				f.Close()
				return usageErr(fmt.Errorf("api token: %w", err))
			}
			if err := f.Close(); err != nil {
				return usageErr(fmt.Errorf("api token: %w", err))
			}
			if _, err := api.ReadTokens(path); err != nil {
				return usageErr(fmt.Errorf("api token: the tokens file is now unusable: %w", err))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "added to %s (scope %s); the token is shown once:\n", path, scope)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	cmd.Flags().StringVar(&scope, "scope", "", "a session id, or '*' for every session and the event stream (required)")
	cmd.Flags().StringVar(&name, "name", "", "who the token is for, kept beside its hash")
	_ = cmd.MarkFlagRequired("scope")
	return cmd
}
