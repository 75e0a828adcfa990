package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/journal"
)

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create and show the checkpoint signing key",
		Long: `The journal signs its checkpoints with an Ed25519 key in the
golang.org/x/mod/sumdb/note format. The signer key (key_file, default
<data_dir>/keys/checkpoint.key, mode 0600) stays on the host with root; the
verifier key (checkpoint.pub beside it) goes wherever checkpoints are checked.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newKeysGenerateCmd(g), newKeysShowCmd(g))
	return cmd
}

// keyPaths returns the signer and verifier key paths: in out when given,
// else key_file and the .pub beside it.
func keyPaths(cfg *Config, out string) (skey, vkey string) {
	if out != "" {
		return journal.KeyPairIn(out)
	}
	return cfg.KeyFile, journal.VerifierPath(cfg.KeyFile)
}

func newKeysGenerateCmd(g *globals) *cobra.Command {
	var name, out string
	cmd := &cobra.Command{
		Use:   "generate [--name N] [--out DIR]",
		Short: "Generate a checkpoint key pair (refuses to overwrite)",
		Long: `generate writes a new signer key (mode 0600) and its verifier key (.pub, mode
0644): to DIR/checkpoint.key and DIR/checkpoint.pub with --out, else to
key_file and the .pub beside it (default <data_dir>/keys). It refuses to
overwrite either file. The key name defaults to the checkpoint origin
(sandtrail/<host>). It prints the verifier key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if name == "" {
				name = cfg.Origin
			}
			skeyPath, vkeyPath := keyPaths(cfg, out)
			vkey, err := journal.WriteKeyPair(skeyPath, vkeyPath, name)
			if err != nil {
				return fmt.Errorf("keys generate: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote signer key %s and verifier key %s\n", skeyPath, vkeyPath)
			fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "key name (default the checkpoint origin, sandtrail/<host>)")
	f.StringVar(&out, "out", "", "directory for checkpoint.key and checkpoint.pub (default beside key_file)")
	return cmd
}

func newKeysShowCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "show [--out DIR]",
		Short: "Print the checkpoint verifier (public) key",
		Long: `show prints the verifier key. It derives it from the signer key when it can
read it, and checks that the .pub file beside it (if any) matches; otherwise
it prints the .pub file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			vkey, err := journal.ReadVerifierKey(keyPaths(cfg, out))
			if err != nil {
				return fmt.Errorf("keys show: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory holding checkpoint.key and checkpoint.pub (default beside key_file)")
	return cmd
}
