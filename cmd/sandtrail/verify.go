package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sealed"
	"github.com/sandtrail/sandtrail/record/sink"
)

// loadVerifiers reads verifier key files; with none given, the one beside
// the configured signing key.
func loadVerifiers(cfg *Config, files []string) (note.Verifiers, error) {
	if len(files) == 0 {
		files = []string{journal.VerifierPath(cfg.KeyFile)}
	}
	return journal.LoadVerifiers(files...)
}

// verifyLong is verify's help.
const verifyLong = `verify recomputes the journal's Merkle tree from its entries (it never trusts
the stored hash file) and checks every stored checkpoint, plus each
checkpoint given with --checkpoint (for example one shipped off-host), against
the verifier keys (--key, default the .pub beside key_file,
<data_dir>/keys/checkpoint.pub). A checkpoint signed by any other key is a
failure. It names the first bad sequence number.

Pass the newest checkpoint held off-host with --checkpoint, or a sink's export
with --against (the signed checkpoints every sink carries, docs/sinks.md): that
is what detects a journal truncated or rolled back (and its checkpoints
deleted) on the host.
Entries after the newest checkpoint are "uncovered": no signature vouches for
them yet, so verify reports them with their own exit code.

Exit codes (docs/operations.md has the table every command shares):
  0  intact     every entry is covered by a verified checkpoint
  1  error      usage error, or the journal or a key could not be read
  2  tampered   an entry, a segment or a checkpoint is bad, or the journal is
                shorter than a checkpoint (the report names the first bad seq)
  3  uncovered  nothing is bad, but entries (or an incomplete last frame)
                follow the newest verified checkpoint`

// verifyOptions are verify's flags.
type verifyOptions struct {
	held, against, keys []string
	format              string
	decode              bool
}

func newVerifyCmd(g *globals) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [--checkpoint FILE]... [--against EXPORT]... [--key PUB]... [--format text|json]",
		Short: "Verify the journal: recompute its Merkle tree and check every signed checkpoint",
		Long:  verifyLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageErr(fmt.Errorf("verify takes no arguments, got %q", args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(g, cmd.OutOrStdout()) },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	f := cmd.Flags()
	f.StringArrayVar(&o.held, "checkpoint", nil, "a checkpoint note held elsewhere (repeatable)")
	f.StringArrayVar(&o.against, "against", nil, "a sink's export (the receiver's file: JSON lines, rsyslog, OTLP JSON, Splunk events) whose signed checkpoints are held elsewhere (repeatable)")
	f.StringArrayVar(&o.keys, "key", nil, "verifier key file (repeatable; default the .pub beside key_file)")
	f.StringVar(&o.format, "format", "text", "output format: text or json")
	f.BoolVar(&o.decode, "decode", false, "also decode and validate every event (slower)")
	return cmd
}

// run verifies the journal of g's config and writes the report to out.
func (o *verifyOptions) run(g *globals, out io.Writer) error {
	if err := checkFormat(o.format, "text", "json"); err != nil {
		return err
	}
	cfg, verifiers, err := g.loadVerifiers("verify", o.keys)
	if err != nil {
		return err
	}
	var notes [][]byte
	for _, f := range o.held {
		b, err := readSmallFile(f)
		if err != nil {
			return usageErr(fmt.Errorf("verify: reading checkpoint: %w", err))
		}
		notes = append(notes, b)
	}
	for _, f := range o.against {
		cps, err := exportCheckpoints(f)
		if err != nil {
			return usageErr(fmt.Errorf("verify --against: %w", err))
		}
		notes = append(notes, cps...)
	}
	var opts []journal.VerifyOption
	if o.decode {
		opts = append(opts, journal.DecodeEvents())
	}
	dir := cfg.JournalDir()
	rep, verr := journal.Verify(dir, verifiers, notes, opts...)
	if verr != nil && !errors.Is(verr, journal.ErrTampered) {
		return usageErr(verr)
	}
	// The sealed tool I/O is covered through its hashes in the events:
	// each blob they name must still be there, unchanged.
	sealedN, bad, err := sealed.StoreAt(cfg.SealedDir()).CheckJournal(dir)
	if err != nil && rep.Status != journal.StatusTampered {
		return usageErr(fmt.Errorf("verify: checking sealed tool I/O: %w", err))
	}
	if len(bad) > 0 {
		rep.Status, rep.Problems = journal.StatusTampered, append(rep.Problems, bad...)
		if verr == nil {
			verr = fmt.Errorf("%w: %s", journal.ErrTampered, bad[0])
		}
	}
	if o.format == "json" {
		err = writeVerifyJSON(out, dir, rep, sealedN)
	} else {
		err = writeVerifyText(out, dir, rep, o.held, sealedN)
	}
	if err != nil {
		return usageErr(err)
	}
	switch rep.Status {
	case journal.StatusTampered:
		return &exitError{code: exitTampered, err: verr}
	case journal.StatusUncovered:
		return &exitError{code: exitUncovered, err: fmt.Errorf("verify: %d entries after the newest checkpoint are not covered by a signature yet", rep.Uncovered)}
	}
	return nil
}

// exportCheckpoints reads the signed checkpoints a sink's export holds.
func exportCheckpoints(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cps, err := sink.Checkpoints(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cps) == 0 {
		return nil, fmt.Errorf("%s holds no signed checkpoint", path)
	}
	return cps, nil
}

// readSmallFile reads a checkpoint or key file, refusing a large one.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<20 {
		return nil, fmt.Errorf("%s: larger than 1 MiB", path)
	}
	return b, nil
}

func writeVerifyJSON(w io.Writer, dir string, rep *journal.Report, sealedN int) error {
	type out struct {
		Journal string `json:"journal"`
		*journal.Report
		// Sealed counts the sealed I/O blobs checked against the events.
		Sealed int `json:"sealed"`
	}
	return writeJSON(w, out{Journal: dir, Report: rep, Sealed: sealedN})
}

func writeVerifyText(w io.Writer, dir string, rep *journal.Report, held []string, sealedN int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "journal     %s\n", dir)
	fmt.Fprintf(&b, "status      %s\n", rep.Status)
	fmt.Fprintf(&b, "entries     %d in %d segments\n", rep.Entries, rep.Segments)
	if rep.Pruned > 0 {
		fmt.Fprintf(&b, "pruned      %d entries (tombstones: their leaf hashes are in the tree, their events gone)\n", rep.Pruned)
	}
	fmt.Fprintf(&b, "root        %s\n", rep.Root)
	fmt.Fprintf(&b, "checkpoints %d verified (%d of %d held)\n", rep.Checkpoints, rep.Held, len(held))
	fmt.Fprintf(&b, "covered     %d entries\n", rep.Covered)
	if rep.Status != journal.StatusTampered {
		fmt.Fprintf(&b, "uncovered   %d entries\n", rep.Uncovered)
	}
	if sealedN > 0 {
		fmt.Fprintf(&b, "sealed      %d blobs of tool I/O checked against their events\n", sealedN)
	}
	if rep.TailBytes > 0 {
		fmt.Fprintf(&b, "tail        %d bytes of an incomplete last frame\n", rep.TailBytes)
	}
	if rep.FirstBad != nil {
		how := "exactly"
		if !rep.Exact {
			how = "or later: the hash file could not pinpoint it"
		}
		fmt.Fprintf(&b, "first bad   seq %d (%s)\n", *rep.FirstBad, how)
	}
	for i, p := range rep.Problems {
		if i == 0 {
			b.WriteString("problems\n")
		}
		fmt.Fprintf(&b, "  %s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
