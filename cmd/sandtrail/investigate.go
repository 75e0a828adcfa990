package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/sealed"
)

func newInvestigateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "investigate",
		Short: "Reveal what the record keeps sealed, for an investigation (journaled)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newUnsealCmd(g))
	return cmd
}

func newUnsealCmd(g *globals) *cobra.Command {
	var (
		identity, session, reason, format string
		seqs                              []uint
	)
	cmd := &cobra.Command{
		Use:   "unseal --identity KEY --session S [--event SEQ]... --reason TEXT [--format text|json]",
		Short: "Reveal a session's sealed tool I/O with an investigator's age identity",
		Long: `unseal opens the full tool and model I/O that the policy kept sealed
(tool_io verbosity full; docs/agents.md): each blob beside the journal that
a session's events name, encrypted to the investigators' age recipients.

Before anything is shown, the unseal is journaled as an investigate.unseal
event: who (the caller's uid, by the control socket's peer credentials when
a daemon runs), which events, with which key, and why. If that cannot be
journaled, nothing is shown. A blob that no longer matches the hash in its
event is reported as tampered (exit 2), and verify reports it too.

It reads the sealed store (root's) and, without a daemon, opens the journal
as its writer: run it as root.`,
		Example: `  sandtrail investigate unseal --identity ~/ir.key --session sess-7f3a --reason "IR-2026-031"
  sandtrail investigate unseal --identity ~/ir.key --session sess-7f3a --event 160 --reason "IR-2026-031" --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usageErr(errors.New("unseal: say why with --reason: the record keeps it"))
			}
			cfg, err := g.load()
			if err != nil {
				return usageErr(err)
			}
			ids, err := readIdentities(identity)
			if err != nil {
				return usageErr(err)
			}
			var want []uint64
			for _, s := range seqs {
				want = append(want, uint64(s))
			}
			items, err := sealed.Find(cfg.JournalDir(), session, want)
			if err != nil {
				return usageErr(fmt.Errorf("unseal: %w", err))
			}
			if len(items) == 0 {
				return usageErr(fmt.Errorf("unseal: session %s has no sealed tool I/O in the record", session))
			}
			opened, recipient, err := sealed.StoreAt(cfg.SealedDir()).OpenEach(items, ids)
			if errors.Is(err, sealed.ErrTampered) || errors.Is(err, sealed.ErrMissing) {
				return &exitError{code: exitTampered, err: fmt.Errorf("unseal: %w", err)}
			}
			if err != nil {
				return usageErr(fmt.Errorf("unseal: %w", err))
			}
			inv := &event.Investigate{Session: session, Reason: reason, Recipient: recipient}
			for _, it := range items {
				inv.Events, inv.Refs = append(inv.Events, it.Seq), append(inv.Refs, it.Ref)
			}
			seq, err := journalUnseal(cmd.Context(), g, cfg, inv)
			if err != nil {
				return fmt.Errorf("unseal: not journaled, so nothing is shown: %w", err)
			}
			return writeUnsealed(cmd.OutOrStdout(), format, seq, items, opened)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	f := cmd.Flags()
	f.StringVar(&identity, "identity", "", "age identity file (AGE-SECRET-KEY-1…, as age-keygen writes it; required)")
	f.StringVar(&session, "session", "", "the session (required)")
	f.UintSliceVar(&seqs, "event", nil, "only the event with this seq (repeatable; default every sealed event of the session)")
	f.StringVar(&reason, "reason", "", "why (required; journaled with the unseal)")
	f.StringVar(&format, "format", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("identity")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}

// readIdentities reads an age identity file.
func readIdentities(path string) ([]age.Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("unseal: --identity: %w", err)
	}
	defer f.Close()
	ids, err := sealed.ParseIdentities(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("unseal: --identity %s: %w", path, err)
	}
	return ids, nil
}

// journalUnseal journals inv through the daemon's control socket, or,
// when no daemon runs, by opening the journal as root.
func journalUnseal(ctx context.Context, g *globals, cfg *Config, inv *event.Investigate) (uint64, error) {
	resp, err := control.Call(cfg.ControlSocket(), &control.Request{Op: control.OpUnseal, Unseal: inv})
	if err == nil {
		return resp.Seq, nil
	}
	if !errors.Is(err, control.ErrNoDaemon) {
		return 0, err
	}
	if os.Geteuid() != 0 {
		return 0, errors.New("no daemon runs, and opening the journal needs root (its writer holds the signing key)")
	}
	e, err := daemon.UnsealEvent(cfg.Host, inv, uint32(os.Getuid()))
	if err != nil {
		return 0, err
	}
	j, err := daemon.OpenJournal(cfg, newLogger(cfg))
	if err != nil {
		return 0, err
	}
	err = j.Append(ctx, e)
	return e.Seq, errors.Join(err, j.Close())
}

func writeUnsealed(w io.Writer, format string, seq uint64, items []sealed.Sealed, opened []*sealed.Contents) error {
	type call struct {
		Seq       uint64 `json:"seq"`
		TS        string `json:"ts"`
		Kind      string `json:"kind"`
		Name      string `json:"name"`
		SealedRef string `json:"sealed_ref"`
		Input     string `json:"input"`
		Output    string `json:"output"`
	}
	calls := make([]call, len(items))
	for i, it := range items {
		calls[i] = call{Seq: it.Seq, TS: it.Event.TS.Format("2006-01-02T15:04:05.000Z07:00"), Kind: it.Event.Kind, Name: opened[i].Name,
			SealedRef: it.Ref, Input: opened[i].Input, Output: opened[i].Output}
	}
	if format == "json" {
		return writeJSON(w, map[string]any{"journaled_seq": seq, "calls": calls})
	}
	fmt.Fprintf(w, "unseal journaled at seq %d\n", seq)
	for _, c := range calls {
		fmt.Fprintf(w, "\nseq %d  %s  %s %s\n--- input (%d bytes)\n%s\n--- output (%d bytes)\n%s\n", c.Seq, c.TS, c.Kind,
			render.Clean(c.Name, 128), len(c.Input), render.Clean(c.Input, len(c.Input)), len(c.Output), render.Clean(c.Output, len(c.Output)))
	}
	return nil
}
