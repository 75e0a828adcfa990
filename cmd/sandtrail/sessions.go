package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
)

func newSessionsCmd(g *globals) *cobra.Command {
	var format string
	var args *query.Args
	cmd := &cobra.Command{
		Use:   "sessions [filters] [--format table|json|jsonl]",
		Short: "List the sessions that have events matching the filters",
		Long: `sessions lists each session that has at least one event matching every
filter given (all sessions without filters), ordered by its first event: its
first and last event time, its event counts (all, process, file, net, pkg,
alert), and how it ended (reason and exit status, from session.terminate).
The host's own events (collector.capabilities, journal.recovered, a
host-wide collector.loss) belong to no session and are not listed; query
shows them.

` + filterHelp + `

Output (--format):
  table   one line per session (default)
  json    one JSON array of session objects
  jsonl   one session object per line`,
		Example: `  # 1. which sessions accessed a path (a prefix, or a glob)
  sandtrail sessions --path /home/agent/.ssh
  sandtrail sessions --path '/home/*/.ssh/id_*'
  # 2. which sessions connected to (or looked up) a domain or its sub-domains
  sandtrail sessions --domain '*.evil.example'
  # 3. which sessions installed a package version (exact, purl, or range)
  sandtrail sessions --package npm:event-stream@3.3.6
  sandtrail sessions --package pkg:npm/event-stream@3.3.6
  sandtrail sessions --package 'npm:lodash@>=4.17.0 <4.17.21'
  sandtrail sessions --package 'pypi:requests==2.31.0'
  # 4. which sessions ended with a reason
  sandtrail sessions --reason oom --since 7d
  # 5. one session's summary (its timeline: sandtrail query --session ID)
  sandtrail sessions --session sess-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFiltered(cmd, g, args, format, []string{"table", "json", "jsonl"}, printSessions)
		},
	}
	args = filterFlags(cmd)
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or jsonl")
	storeFlag(g, cmd)
	return cmd
}

// sessionJSON is a session summary in the json and jsonl formats.
type sessionJSON struct {
	SessionID  string    `json:"session_id"`
	First      time.Time `json:"first"`
	Last       time.Time `json:"last"`
	Events     uint64    `json:"events"`
	Process    uint64    `json:"process"`
	File       uint64    `json:"file"`
	Net        uint64    `json:"net"`
	Pkg        uint64    `json:"pkg"`
	Alert      uint64    `json:"alert"`
	Lost       uint64    `json:"lost"`
	Ended      bool      `json:"ended"`
	End        time.Time `json:"end,omitzero"`
	EndReason  string    `json:"end_reason,omitempty"`
	ExitStatus *int32    `json:"exit_status,omitempty"`
}

func toSessionJSON(s index.Session) sessionJSON {
	return sessionJSON{SessionID: s.ID, First: s.First, Last: s.Last, Events: s.Events, Process: s.Procs,
		File: s.Files, Net: s.Nets, Pkg: s.Pkgs, Alert: s.Alerts, Lost: s.Lost, Ended: s.Ended, End: s.End,
		EndReason: s.EndReason, ExitStatus: s.ExitStatus}
}

func printSessions(ctx context.Context, out io.Writer, ix *index.Reader, f query.Filter, format string) error {
	ss, err := ix.Sessions(ctx, f)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	switch format {
	case "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tFIRST\tLAST\tEVENTS\tPROC\tFILE\tNET\tPKG\tALERT\tLOST\tEND\tEXIT")
		for _, s := range ss {
			end, exit := "-", "-"
			if s.Ended {
				end = render.Clean(s.EndReason, 24)
				if end == "" {
					end = "ended"
				}
				if s.ExitStatus != nil {
					exit = fmt.Sprint(*s.ExitStatus)
				}
			}
			const tf = "2006-01-02T15:04:05Z07:00"
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", render.Clean(s.ID, 40), s.First.Format(tf), s.Last.Format(tf),
				s.Events, s.Procs, s.Files, s.Nets, s.Pkgs, s.Alerts, s.Lost, end, exit)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	case "json":
		out := make([]sessionJSON, 0, len(ss))
		for _, s := range ss {
			out = append(out, toSessionJSON(s))
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteString("\n")
	case "jsonl":
		enc := json.NewEncoder(w)
		for _, s := range ss {
			if err := enc.Encode(toSessionJSON(s)); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}
