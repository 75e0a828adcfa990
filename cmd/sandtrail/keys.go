package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
		return filepath.Join(out, "checkpoint.key"), filepath.Join(out, "checkpoint.pub")
	}
	return cfg.KeyFile, pubKeyPath(cfg.KeyFile)
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
			for _, p := range []string{skeyPath, vkeyPath} {
				if _, err := os.Lstat(p); err == nil {
					return fmt.Errorf("keys generate: %s already exists; refusing to overwrite it", p)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("keys generate: %w", err)
				}
			}
			skey, vkey, err := journal.GenerateKey(name)
			if err != nil {
				return fmt.Errorf("keys generate: %w", err)
			}
			if err := os.MkdirAll(filepath.Dir(skeyPath), 0o700); err != nil {
				return fmt.Errorf("keys generate: %w", err)
			}
			if err := writeNew(skeyPath, skey, 0o600); err != nil {
				return fmt.Errorf("keys generate: %w", err)
			}
			if err := os.MkdirAll(filepath.Dir(vkeyPath), 0o755); err != nil {
				return fmt.Errorf("keys generate: %w", err)
			}
			if err := writeNew(vkeyPath, vkey, 0o644); err != nil {
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

// writeNew creates path with exactly perm (whatever the umask), failing if
// it exists, and syncs it.
func writeNew(path, content string, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
			skeyPath, vkeyPath := keyPaths(cfg, out)
			pub, perr := os.ReadFile(vkeyPath)
			if _, err := os.Stat(skeyPath); err == nil {
				if _, err := journal.LoadSigner(skeyPath); err != nil {
					return fmt.Errorf("keys show: %w", err)
				}
				b, err := os.ReadFile(skeyPath)
				if err != nil {
					return fmt.Errorf("keys show: %w", err)
				}
				vkey, err := journal.VerifierKey(strings.TrimSpace(string(b)))
				if err != nil {
					return fmt.Errorf("keys show: %w", err)
				}
				if perr == nil && strings.TrimSpace(string(pub)) != vkey {
					return fmt.Errorf("keys show: %s does not match the signer key %s (it holds %q)", vkeyPath, skeyPath, strings.TrimSpace(string(pub)))
				}
				fmt.Fprintln(cmd.OutOrStdout(), vkey)
				return nil
			}
			if perr != nil {
				return fmt.Errorf("keys show: no key: %w (create one with sandtrail keys generate)", perr)
			}
			if _, err := journal.LoadVerifier(vkeyPath); err != nil {
				return fmt.Errorf("keys show: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(string(pub)))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory holding checkpoint.key and checkpoint.pub (default beside key_file)")
	return cmd
}
