package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
)

// emitOpts are the flags shared by the emit subcommands.
type emitOpts struct {
	session       string
	inputSummary  string
	outputSummary string
}

func newEmitCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emit",
		Short: "Send a tool or model event to the daemon (for orchestrators)",
		Long: `emit sends one tool.invoke or model.io event through the ingest socket.

Only root outside every session may name the session; the daemon records the
event with source "api" and the sender's pid and uid. Run from inside a
session, the daemon attributes the event to that session instead (source
"shim"). Summaries are redacted (tokens, passwords, known key formats) before
they leave this process.

When the daemon is unreachable the event is written to the spool
(ingest.spool_dir, default <data_dir>/spool) and sent with the next emit.`,
		Args: cobra.NoArgs,
	}
	f := cmd.PersistentFlags()
	f.String("socket", "/run/sandtrail/ingest.sock", "ingest socket path (env SANDTRAIL_SOCKET)")
	cmd.AddCommand(newEmitToolCmd(g), newEmitModelCmd(g))
	return cmd
}

func (o *emitOpts) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.session, "session", "", "session id (required)")
	f.StringVar(&o.inputSummary, "input-summary", "", "short summary of the input (redacted before sending)")
	f.StringVar(&o.outputSummary, "output-summary", "", "short summary of the output (redacted before sending)")
	_ = cmd.MarkFlagRequired("session")
}

func newEmitToolCmd(g *globals) *cobra.Command {
	var (
		o        emitOpts
		name     string
		status   string
		duration int64
	)
	cmd := &cobra.Command{
		Use:   "tool --session S --name NAME --status ok|error|timeout",
		Short: "Record one tool invocation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "ok", "error", "timeout":
			default:
				return fmt.Errorf("emit tool: --status %q must be ok, error or timeout", status)
			}
			if name == "" {
				return errors.New("emit tool: --name must not be empty")
			}
			if duration < 0 {
				return fmt.Errorf("emit tool: --duration-ms %d must not be negative", duration)
			}
			e := o.event(event.KindToolInvoke)
			e.Tool = &event.Tool{Name: name, Status: status, DurationMS: duration, IO: event.IO{InputSummary: event.Redact(o.inputSummary), OutputSummary: event.Redact(o.outputSummary)}}
			return emit(cmd, g, e)
		},
	}
	o.bind(cmd)
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "tool name (required)")
	f.StringVar(&status, "status", "", "ok, error or timeout (required)")
	f.Int64Var(&duration, "duration-ms", 0, "how long the call took, in milliseconds")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("status")
	return cmd
}

func newEmitModelCmd(g *globals) *cobra.Command {
	var (
		o      emitOpts
		tokens int64
	)
	cmd := &cobra.Command{
		Use:   "model --session S",
		Short: "Record one model call",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokens < 0 {
				return fmt.Errorf("emit model: --tokens %d must not be negative", tokens)
			}
			e := o.event(event.KindModelIO)
			e.Model = &event.Model{Tokens: tokens, IO: event.IO{InputSummary: event.Redact(o.inputSummary), OutputSummary: event.Redact(o.outputSummary)}}
			return emit(cmd, g, e)
		},
	}
	o.bind(cmd)
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "tokens used")
	return cmd
}

func (o *emitOpts) event(kind string) *event.Event {
	return &event.Event{
		V:         event.SchemaVersion,
		TS:        time.Now().UTC(),
		SessionID: o.session,
		Kind:      kind,
		Source:    event.SourceAPI,
		EventID:   ingest.NewEventID(),
	}
}

// emit validates e locally, then sends it, spooling when the daemon is down.
func emit(cmd *cobra.Command, g *globals, e *event.Event) error {
	// Bound here, not at construction: daemon binds the same key.
	g.bindFlag("socket", cmd.Flags().Lookup("socket"))
	cfg, err := g.load()
	if err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	spool := cfg.Ingest.SpoolDir
	if spool == "" {
		spool = filepath.Join(cfg.DataDir, "spool")
	}
	c, err := ingest.Dial(cfg.Socket, ingest.WithSpool(spool, 0))
	if err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	defer c.Close()
	err = c.Send(cmd.Context(), e)
	if errors.Is(err, ingest.ErrSpooled) {
		fmt.Fprintf(os.Stderr, "sandtrail: daemon unreachable at %s; event %s spooled in %s, it is sent with the next emit\n",
			cfg.Socket, e.EventID, spool)
		return nil
	}
	if err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), e.EventID)
	return nil
}
