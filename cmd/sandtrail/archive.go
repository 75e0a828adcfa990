package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/archive"
	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/render"
)

// archiveLong is archive's help.
const archiveLong = `archive is the journal's cold tier. It seals a session into one bundle that
proves itself: every journal entry of the session, byte for byte with its
seq; an RFC 6962 inclusion proof of each entry in the tree of one signed
checkpoint that covers them all; that checkpoint note; and a manifest (session,
origin, hosts, seqs, leaf hashes, checkpoint size and root, digests). A bundle
is a .tar.gz of manifest.json, checkpoint, entries.jsonl and proofs.json
(docs/archive.md).

Bundles are kept in a store, named by --to or --from:
  DIR, ./DIR, dir:DIR         a directory: DIR/SESSION.bundle.tar.gz
  oci://HOST[:PORT]/REPO      an OCI registry repository: one artifact per
  HOST[:PORT]/REPO            session, tagged with the session id
Registry credentials come from the docker keychain (~/.docker/config.json and
its credential helpers). Plain http is used only for a registry on loopback,
or anywhere with --insecure.

A store is not trusted: pull and verify check every bundle against the
verifier keys (--key, default the .pub beside key_file), and verify --live
also against this host's journal.

Exit codes: 0 done and verified; 1 usage error, or something could not be
read or reached (the journal, a key, the store; a session no signed
checkpoint covers yet); 2 tampered: a bundle, or the journal's entries when
sealing, do not verify, or a bundle does not match the live journal.`

// archiveFlags are the flags the archive commands share.
type archiveFlags struct {
	store    string
	keys     []string
	insecure bool
	format   string
}

func (a *archiveFlags) bind(cmd *cobra.Command, storeFlag, storeHelp string, formats string) {
	f := cmd.Flags()
	f.StringVar(&a.store, storeFlag, "", storeHelp)
	f.BoolVar(&a.insecure, "insecure", false, "allow plain http to a registry that is not on loopback")
	if formats != "" {
		f.StringVar(&a.format, "format", strings.SplitN(formats, " ", 2)[0], "output format: "+strings.ReplaceAll(formats, " ", " or "))
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
}

func (a *archiveFlags) bindKeys(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&a.keys, "key", nil, "verifier key file (repeatable; default the .pub beside key_file)")
}

// openStore opens the store the flag names.
func (a *archiveFlags) openStore(command, flag string) (archive.Store, error) {
	if a.store == "" {
		return nil, usageErr(fmt.Errorf("%s: --%s DIR|OCI_REF is required", command, flag))
	}
	var opts []archive.StoreOption
	if a.insecure {
		opts = append(opts, archive.AllowPlainHTTP())
	}
	s, err := archive.OpenStore(a.store, opts...)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%s: %w", command, err))
	}
	return s, nil
}

// archiveExit maps an archive error to its exit code: tampered when a
// bundle, the journal or a checkpoint does not verify, else failed.
func archiveExit(command string, err error) *exitError {
	code := exitFailed
	for _, e := range []error{archive.ErrTampered, archive.ErrMalformed, archive.ErrLiveMismatch, journal.ErrCorrupt,
		journal.ErrBadSignature, journal.ErrUnknownKey, journal.ErrBadCheckpoint} {
		if errors.Is(err, e) {
			code = exitTampered
		}
	}
	return &exitError{code: code, err: fmt.Errorf("%s: %w", command, err)}
}

func newArchiveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Seal sessions into self-verifying bundles kept in a directory or an OCI registry",
		Long:  archiveLong,
		Example: `  # seal two sessions into a directory, then check one against this journal
  sandtrail archive push sess-42 sess-43 --to /srv/sandtrail-archive
  sandtrail archive verify /srv/sandtrail-archive/sess-42.bundle.tar.gz --live
  # the same through a registry
  sandtrail archive push sess-42 --to oci://registry.example/sandtrail/archive
  sandtrail archive list --from oci://registry.example/sandtrail/archive
  sandtrail archive pull sess-42 --from oci://registry.example/sandtrail/archive --out sess-42.bundle.tar.gz
  sandtrail archive verify sess-42 --from oci://registry.example/sandtrail/archive --live`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newArchivePushCmd(g), newArchivePullCmd(g), newArchiveVerifyCmd(g), newArchiveListCmd())
	return cmd
}

func newArchivePushCmd(g *globals) *cobra.Command {
	var a archiveFlags
	cmd := &cobra.Command{
		Use:   "push SESSION... --to DIR|OCI_REF [--key PUB]... [--insecure] [--format text|json]",
		Short: "Seal sessions from the journal and store their bundles",
		Long: `push seals each SESSION: it finds the session's entries through the index
(caught up with the journal first) and reads them from the journal, which
decides what is the session's; proves each one against the journal's newest
checkpoint, which must be signed by --key and cover the session's last entry;
verifies the bundle it made; stores it with --to; and reads it back from the
store and verifies it against the journal (as archive verify --live does).

When the store already holds a bundle of the session that verifies against
the journal, push keeps it ("kept") unless the journal now holds entries of
the session that it lacks (then the new bundle replaces it): pushing again
is safe, also after the session's entries were pruned.

A session still running may have entries no checkpoint covers yet: the
journal signs one within a second while entries arrive, after the session
ends, and when the daemon stops. push then says so and archives the others.

Exit codes: 0 every session archived; 1 one could not be (no such session,
not covered yet, the store unreachable); 2 the journal's entries do not
verify against its checkpoint (run sandtrail verify).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(errors.New("archive push: name at least one SESSION"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return a.push(cmd.Context(), g, cmd, args) },
	}
	a.bind(cmd, "to", "where to store the bundles: DIR or oci://HOST/REPO", "text json")
	a.bindKeys(cmd)
	return cmd
}

// push seals and stores each session, going on after a failure, and
// returns the worst exit.
func (a *archiveFlags) push(ctx context.Context, g *globals, cmd *cobra.Command, sessions []string) error {
	if err := checkFormat(a.format, "text", "json"); err != nil {
		return err
	}
	store, err := a.openStore("archive push", "to")
	if err != nil {
		return err
	}
	cfg, verifiers, err := g.loadVerifiers("archive push", a.keys)
	if err != nil {
		return err
	}
	ix, err := openIndex(ctx, cfg, newLogger(cfg))
	if err != nil {
		return usageErr(fmt.Errorf("archive push: %w", err))
	}
	defer ix.Close()
	archiver := archive.NewArchiver(cfg.JournalDir(), ix, verifiers, store)
	var stored []archive.Stored
	var worst *exitError
	for _, s := range sessions {
		st, err := archiver.Archive(ctx, s)
		if err != nil {
			ee := archiveExit("archive push "+s, err)
			fmt.Fprintln(cmd.ErrOrStderr(), "sandtrail:", ee.err)
			if worst == nil || ee.code > worst.code {
				worst = ee
			}
			continue
		}
		stored = append(stored, st)
	}
	if err := writeStored(cmd.OutOrStdout(), a.format, "archived", stored); err != nil {
		return usageErr(err)
	}
	if worst != nil {
		return &exitError{code: worst.code, err: fmt.Errorf("archive push: %d of %d sessions not archived", len(sessions)-len(stored), len(sessions))}
	}
	return nil
}

func newArchivePullCmd(g *globals) *cobra.Command {
	var a archiveFlags
	var out string
	cmd := &cobra.Command{
		Use:   "pull SESSION|DIGEST --from DIR|OCI_REF [--out FILE] [--key PUB]... [--insecure]",
		Short: "Fetch a session's bundle from a store, verify it, and write it to a file",
		Long: `pull fetches the bundle of SESSION, or the one whose digest is DIGEST
(sha256:…: the bundle's own in a directory, the OCI manifest's that push
printed in a registry), verifies it alone (as archive verify does), and only
then writes it to --out (default ./SESSION.bundle.tar.gz; - for stdout).

Exit codes: 0 pulled and verified; 1 not found or unreachable; 2 the bundle
does not verify (nothing is written).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("archive pull takes one SESSION or DIGEST, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := a.openStore("archive pull", "from")
			if err != nil {
				return err
			}
			_, verifiers, err := g.loadVerifiers("archive pull", a.keys)
			if err != nil {
				return err
			}
			b, err := store.Get(cmd.Context(), args[0])
			if err != nil {
				return archiveExit("archive pull", err)
			}
			rep, err := b.Verify(verifiers)
			if err != nil {
				return archiveExit("archive pull", err)
			}
			return writeBundle(cmd, out, b, rep)
		},
	}
	a.bind(cmd, "from", "the store to pull from: DIR or oci://HOST/REPO", "")
	a.bindKeys(cmd)
	cmd.Flags().StringVar(&out, "out", "", "file to write (default ./SESSION.bundle.tar.gz; - for stdout)")
	return cmd
}

// writeBundle writes a verified bundle to out, atomically for a file.
func writeBundle(cmd *cobra.Command, out string, b *archive.Bundle, rep *archive.Report) error {
	if out == "-" {
		_, err := cmd.OutOrStdout().Write(b.Bytes())
		return err
	}
	if out == "" {
		out = archive.FileName(b.Session())
	}
	if err := atomicfile.WriteFile(out, b.Bytes(), 0o640); err != nil {
		return usageErr(fmt.Errorf("archive pull: %w", err))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "pulled %s: %d entries, seqs %d to %d, checkpoint %s size %d, verified; wrote %s (%s)\n",
		rep.SessionID, rep.Entries, rep.First, rep.Last, render.Clean(rep.Origin, 64), rep.Checkpoint.Size, filepath.Clean(out), b.Digest())
	return nil
}

func newArchiveVerifyCmd(g *globals) *cobra.Command {
	var a archiveFlags
	var live bool
	cmd := &cobra.Command{
		Use:   "verify BUNDLE_FILE | SESSION|DIGEST --from DIR|OCI_REF [--live] [--key PUB]... [--format text|json]",
		Short: "Verify a bundle alone, or also against this host's journal (--live)",
		Long: `verify checks a bundle file, or with --from the bundle of SESSION (or DIGEST)
in a store. It fails closed, naming the first claim that does not hold:
  - the checkpoint's signature, by a --key (default the .pub beside key_file;
    every signature must be by one, as sandtrail verify requires);
  - the manifest: format, session, counts, and the digests of the files;
  - each entry: its leaf hash (SHA-256 of 0x00 and the entry) is the
    manifest's, its inclusion proof verifies against the signed root, and it
    decodes, holds its own seq, and belongs to the session.

--live also ties the bundle to this host's journal (--data): the journal's
newest checkpoint must verify, have the bundle's origin and be at least as
large; a consistency proof from the journal's hash file must link the two
signed roots; and the journal's stored leaf hash at each of the bundle's seqs
must be the bundle's. It reads only the hash file and the checkpoints, so it
works once the entries themselves were pruned.

A bundle proves that its entries are in the signed log, not that it holds
every entry of its session: a log has no proof of absence.

Exit codes: 0 verified; 1 usage error, or the bundle, store or journal could
not be read; 2 the bundle does not verify, or does not match the journal.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("archive verify takes one BUNDLE_FILE, or a SESSION with --from, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.verify(cmd.Context(), g, cmd.OutOrStdout(), args[0], live)
		},
	}
	a.bind(cmd, "from", "a store to take SESSION's bundle from: DIR or oci://HOST/REPO (default: BUNDLE_FILE is a file)", "text json")
	a.bindKeys(cmd)
	cmd.Flags().BoolVar(&live, "live", false, "also check the bundle against this host's journal")
	return cmd
}

func (a *archiveFlags) verify(ctx context.Context, g *globals, out io.Writer, arg string, live bool) error {
	if err := checkFormat(a.format, "text", "json"); err != nil {
		return err
	}
	cfg, verifiers, err := g.loadVerifiers("archive verify", a.keys)
	if err != nil {
		return err
	}
	var b *archive.Bundle
	if a.store == "" {
		b, err = archive.ReadFile(arg)
	} else {
		var store archive.Store
		if store, err = a.openStore("archive verify", "from"); err != nil {
			return err
		}
		b, err = store.Get(ctx, arg)
	}
	var rep *archive.Report
	if err == nil && live {
		rep, err = b.VerifyLive(cfg.JournalDir(), verifiers)
	} else if err == nil {
		rep, err = b.Verify(verifiers)
	}
	var exit error
	if err != nil {
		exit = archiveExit("archive verify", err)
	}
	if werr := writeArchiveReport(out, a.format, rep, exit); werr != nil {
		return usageErr(werr)
	}
	return exit
}

// writeArchiveReport writes verify's report, or its failure in JSON.
func writeArchiveReport(w io.Writer, format string, rep *archive.Report, failed error) error {
	if format == "json" {
		status, msg := "verified", ""
		var ee *exitError
		if errors.As(failed, &ee) {
			status, msg = "error", ee.err.Error()
			if ee.code == exitTampered {
				status = "tampered"
			}
		}
		return writeJSON(w, struct {
			Status string `json:"status"`
			Error  string `json:"error,omitempty"`
			*archive.Report
		}{status, msg, rep})
	}
	if rep == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "session     %s\n", rep.SessionID)
	fmt.Fprintf(&b, "bundle      %s\n", rep.Digest)
	fmt.Fprintf(&b, "entries     %d, seqs %d to %d\n", rep.Entries, rep.First, rep.Last)
	hosts := strings.Join(rep.Hosts, ", ")
	if hosts == "" {
		hosts = "(none named)"
	}
	fmt.Fprintf(&b, "hosts       %s\n", render.Clean(hosts, 200))
	fmt.Fprintf(&b, "checkpoint  %s size %d root %s (signature verified)\n", render.Clean(rep.Origin, 64), rep.Checkpoint.Size, rep.Checkpoint.Root)
	fmt.Fprintf(&b, "created     %s (the sealer's word)\n", rep.Created.Format(time.RFC3339))
	if rep.Live != nil {
		fmt.Fprintf(&b, "live        %s: consistent with its checkpoint of size %d root %s; %d stored leaf hashes match\n",
			rep.Live.Journal, rep.Live.Checkpoint.Size, rep.Live.Checkpoint.Root, rep.Live.Leaves)
	}
	b.WriteString("status      verified\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func newArchiveListCmd() *cobra.Command {
	var a archiveFlags
	cmd := &cobra.Command{
		Use:   "list --from DIR|OCI_REF [--insecure] [--format table|json]",
		Short: "List the bundles in a store",
		Long: `list describes each bundle in a store: its session, the bundle's digest and
size, the checkpoint size it is proven against and when it was sealed, and
where it is (its file, or its reference by manifest digest). What it prints
is what the store says, unverified: pull or verify a bundle to check it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(a.format, "table", "json"); err != nil {
				return err
			}
			store, err := a.openStore("archive list", "from")
			if err != nil {
				return err
			}
			list, err := store.List(cmd.Context())
			if err != nil {
				return archiveExit("archive list", err)
			}
			return writeStored(cmd.OutOrStdout(), a.format, "", list)
		},
	}
	a.bind(cmd, "from", "the store to list: DIR or oci://HOST/REPO", "table json")
	return cmd
}

// writeStored writes stored bundles: a table, or a JSON array; verb
// begins each line of push's text output.
func writeStored(w io.Writer, format, verb string, list []archive.Stored) error {
	if list == nil {
		list = []archive.Stored{}
	}
	switch format {
	case "json":
		return writeJSON(w, list)
	case "text":
		for _, s := range list {
			line := fmt.Sprintf("%s %s: checkpoint size %d, bundle %s (%d bytes) at %s\n", verb, s.SessionID, s.CheckpointSize, s.Digest, s.Size, s.Location)
			if s.Kept {
				line = fmt.Sprintf("kept %s: the store's bundle %s (checkpoint size %d) holds every entry of it the journal has\n", s.SessionID, s.Digest, s.CheckpointSize)
			}
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tCHECKPOINT\tCREATED\tSIZE\tDIGEST\tLOCATION")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", s.SessionID, s.CheckpointSize, s.Created.Format(time.RFC3339), s.Size, s.Digest, render.Clean(s.Location, 200))
	}
	return tw.Flush()
}
