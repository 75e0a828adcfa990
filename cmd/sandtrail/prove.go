package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/journal"
)

func newProveCmd(g *globals) *cobra.Command {
	var (
		cpFile string
		keys   []string
		format string
	)
	cmd := &cobra.Command{
		Use:   "prove SEQ [--checkpoint FILE] [--key PUB]... [--format text|json]",
		Short: "Print and check the inclusion proof of one journal entry against a checkpoint",
		Long: `prove prints entry SEQ's leaf hash (SHA-256 of 0x00 and the entry's canonical
JSON, RFC 6962) and its inclusion proof in the Merkle tree of a signed
checkpoint, then checks the proof. The checkpoint is --checkpoint FILE (for
example one held off-host) or the journal's latest, and its signature must
verify with --key (default the .pub beside key_file). An entry the retention
policy pruned is proven by the leaf hash its tombstone keeps: the proof shows
that the pruned entry was in the signed tree, without the event.

Anyone holding the checkpoint can re-check the printed proof with
golang.org/x/mod/sumdb/tlog.CheckRecord, without the journal.

Exit codes: 0 proven; 1 usage or read error, or SEQ not covered by the
checkpoint; 2 the entry does not match the checkpoint (tampered).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("prove takes one SEQ, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usageErr(fmt.Errorf("prove: SEQ %q is not a sequence number", args[0]))
			}
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			cfg, verifiers, err := g.loadVerifiers("prove", keys)
			if err != nil {
				return err
			}
			dir := cfg.JournalDir()
			if cpFile == "" {
				cpFile = filepath.Join(dir, "checkpoints", "latest")
			}
			cp, err := journal.ReadCheckpoint(cpFile, verifiers)
			if err != nil {
				code := exitFailed
				if errors.Is(err, journal.ErrBadSignature) || errors.Is(err, journal.ErrUnknownKey) || errors.Is(err, journal.ErrBadCheckpoint) {
					code = exitTampered
				}
				return &exitError{code: code, err: fmt.Errorf("prove: %w", err)}
			}
			proof, err := journal.Prove(dir, seq, cp)
			if errors.Is(err, journal.ErrCorrupt) {
				return &exitError{code: exitTampered, err: fmt.Errorf("prove: %w", err)}
			}
			if err != nil {
				return usageErr(fmt.Errorf("prove: %w", err))
			}
			raw, leaf, err := entryLeaf(dir, seq)
			if err != nil {
				return usageErr(fmt.Errorf("prove: %w", err))
			}
			if err := tlog.CheckRecord(proof, int64(cp.Size), cp.Root, int64(seq), leaf); err != nil {
				return &exitError{code: exitTampered, err: fmt.Errorf("prove: entry %d: %w", seq, err)}
			}
			return writeProof(cmd.OutOrStdout(), format, seq, raw, leaf, cp, proof)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	f := cmd.Flags()
	f.StringVar(&cpFile, "checkpoint", "", "checkpoint note to prove against (default the journal's latest)")
	f.StringArrayVar(&keys, "key", nil, "verifier key file (repeatable; default the .pub beside key_file)")
	f.StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// entryLeaf returns entry seq and its leaf hash, or, for a pruned entry, a
// nil entry and the leaf hash its tombstone keeps.
func entryLeaf(dir string, seq uint64) ([]byte, tlog.Hash, error) {
	raw, err := journal.Entry(dir, seq)
	var pruned *journal.PrunedError
	switch {
	case errors.As(err, &pruned):
		return nil, pruned.Leaf, nil
	case err != nil:
		return nil, tlog.Hash{}, err
	}
	return raw, journal.LeafHash(raw), nil
}

func writeProof(w io.Writer, format string, seq uint64, raw []byte, leaf tlog.Hash, cp *journal.Checkpoint, proof tlog.RecordProof) error {
	if format == "json" {
		type checkpoint struct {
			Origin string    `json:"origin"`
			Size   uint64    `json:"size"`
			Root   tlog.Hash `json:"root"`
			Note   string    `json:"note"`
		}
		out := struct {
			Seq        uint64          `json:"seq"`
			Leaf       tlog.Hash       `json:"leaf"`
			Entry      json.RawMessage `json:"entry"`
			Pruned     bool            `json:"pruned,omitempty"`
			Checkpoint checkpoint      `json:"checkpoint"`
			Proof      []tlog.Hash     `json:"proof"`
			Verified   bool            `json:"verified"`
		}{seq, leaf, raw, raw == nil, checkpoint{cp.Origin, cp.Size, cp.Root, string(cp.Text)}, proof, true}
		if out.Proof == nil {
			out.Proof = []tlog.Hash{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seq         %d\n", seq)
	fmt.Fprintf(&b, "leaf        %s\n", leaf)
	if raw == nil {
		fmt.Fprintf(&b, "entry       pruned by the retention policy: its tombstone keeps this leaf hash\n")
	}
	fmt.Fprintf(&b, "checkpoint  %s size %d root %s\n", cp.Origin, cp.Size, cp.Root)
	fmt.Fprintf(&b, "proof       %d hashes\n", len(proof))
	for i, h := range proof {
		fmt.Fprintf(&b, "  %2d %s\n", i, h)
	}
	fmt.Fprintf(&b, "verified    entry %d is in the tree of size %d\n", seq, cp.Size)
	_, err := io.WriteString(w, b.String())
	return err
}
