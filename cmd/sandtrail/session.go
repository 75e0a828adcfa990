package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/render"
)

func newSessionCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, start, pause, resume, stop, clean up, list and show the daemon's sessions",
		Long: `session drives the sessions of the running daemon through its control socket
(control.sock beside the ingest socket, /run/sandtrail/control.sock by default;
root only). Every lifecycle step is recorded in the journal by the daemon;
pause and resume record the calling user as their actor.

A session goes created -> running (start) <-> paused -> terminated (stop, its
command's exit, a limit or the timeout) -> cleaned (cleanup). start runs one
command in the session, detached: stdin is /dev/null, stdout and stderr are
appended to stdout.log and stderr.log in <data_dir>/sessions/<id>/. To run a
command attached to the terminal, use sandtrail run.`,
		Example: `  id=$(sandtrail session create --memory 512M --timeout 1h)
  sandtrail session start "$id" -- python3 agent.py
  sandtrail session pause "$id"
  sandtrail session resume "$id"
  sandtrail session stop "$id"
  sandtrail session cleanup "$id" --keep snapshot
  sandtrail session list`,
	}
	cmd.PersistentFlags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.AddCommand(newSessionCreateCmd(g, &format), newSessionStartCmd(g, &format),
		newSessionOpCmd(g, &format, "pause", "Freeze every process of a session", true),
		newSessionOpCmd(g, &format, "resume", "Thaw a paused session", false),
		newSessionOpCmd(g, &format, "stop", "Terminate a session (reason api unless --reason)", true),
		newSessionCleanupCmd(g, &format), newSessionListCmd(g, &format),
		newSessionOpCmd(g, &format, "show", "Show one session", false))
	return cmd
}

// sessionCall sends req to the daemon of g's config and prints the answer.
func sessionCall(g *globals, cmd *cobra.Command, format string, req *control.Request) error {
	if err := checkFormat(format, "text", "json"); err != nil {
		return err
	}
	cfg, err := g.load()
	if err != nil {
		return err
	}
	resp, err := control.Call(cfg.ControlSocket(), req)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if format == "json" {
		if req.Op == control.OpList {
			if resp.Sessions == nil {
				resp.Sessions = []control.SessionInfo{}
			}
			return writeJSON(out, resp.Sessions)
		}
		return writeJSON(out, resp.Session)
	}
	switch req.Op {
	case "list":
		writeSessionTable(out, resp.Sessions)
	case "create":
		fmt.Fprintln(out, resp.Session.ID)
	case "show":
		writeSessionInfo(out, resp.Session)
	default:
		fmt.Fprintf(out, "%s: %s\n", resp.Session.ID, resp.Session.State)
	}
	return nil
}

func newSessionCreateCmd(g *globals, format *string) *cobra.Command {
	var (
		req        launch.Request
		lim        limitFlags
		policyFile string
	)
	cmd := &cobra.Command{
		Use:   "create [--session ID] [--user U] [limits]",
		Short: "Create a session (its cgroups, workdir and limits) and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := policies.Load(policyFile)
			if err != nil {
				return usageErr(fmt.Errorf("loading policy: %w", err))
			}
			eng, err := policies.New(p)
			if err != nil {
				return usageErr(fmt.Errorf("compiling policy: %w", err))
			}
			if req.Limits, err = lim.apply(eng.Limits(), cmd.Flags()); err != nil {
				return usageErr(err)
			}
			return sessionCall(g, cmd, *format, &control.Request{Op: "create", Spec: &req})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.ID, "session", "", "session id (default: a new sortable random id)")
	f.StringVar(&req.User, "user", "", "user recorded in session.create and its commands run as, exactly (default "+launch.AgentUser+", under a uid of the session's own)")
	f.StringVar(&req.Tenant, "tenant", "", "tenant recorded in session.create")
	f.StringVar(&req.Template, "template", "", "template recorded in session.create")
	f.StringVar(&req.Image, "image", "", "image recorded in session.create")
	f.StringVar(&policyFile, "policy", "", "policy file whose limits are the defaults (default: the embedded policy)")
	lim.bind(f)
	return cmd
}

func newSessionStartCmd(g *globals, format *string) *cobra.Command {
	var req launch.Request
	cmd := &cobra.Command{
		Use:   "start ID [--user U] -- CMD [ARGS...]",
		Short: "Run a command in a created session, detached (output to the session's log files)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return usageErr(fmt.Errorf("usage: sandtrail session start ID [--user U] -- CMD [ARGS...]"))
			}
			req.Argv, req.Env = args[1:], os.Environ()
			return sessionCall(g, cmd, *format, &control.Request{Op: "start", Session: args[0], Spec: &req})
		},
	}
	cmd.Flags().StringVar(&req.User, "user", "", "user to run CMD as, exactly (default: the session's user, under the session's own uid when it has one)")
	return cmd
}

func newSessionOpCmd(g *globals, format *string, op, short string, reason bool) *cobra.Command {
	var why string
	cmd := &cobra.Command{
		Use:   op + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionCall(g, cmd, *format, &control.Request{Op: op, Session: args[0], Reason: why})
		},
	}
	if reason {
		help := "reason recorded: api, timeout or auto"
		if op == "stop" {
			help = "reason recorded: api, timeout, oom, policy_violation, signal or normal"
		}
		cmd.Flags().StringVar(&why, "reason", "api", help)
	}
	return cmd
}

func newSessionCleanupCmd(g *globals, format *string) *cobra.Command {
	var keep string
	cmd := &cobra.Command{
		Use:   "cleanup ID [--keep preserved|deleted|snapshot]",
		Short: "Remove a terminated session's cgroups; keep, delete or snapshot its workdir",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := launch.CheckKeep(keep); err != nil {
				return usageErr(err)
			}
			return sessionCall(g, cmd, *format, &control.Request{Op: "cleanup", Session: args[0], Keep: keep})
		},
	}
	cmd.Flags().StringVar(&keep, "keep", "preserved", "workdir: preserved, deleted or snapshot")
	return cmd
}

func newSessionListCmd(g *globals, format *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the daemon's sessions and their states",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sessionCall(g, cmd, *format, &control.Request{Op: "list"})
		},
	}
}

func writeSessionTable(w io.Writer, ss []control.SessionInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tUSER\tCREATED\tREASON\tEXIT\tCOMMAND")
	for _, s := range ss {
		exit := "-"
		if s.ExitStatus != nil {
			exit = fmt.Sprint(*s.ExitStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, render.OrDash(s.User), s.Created.Format(time.RFC3339),
			render.OrDash(s.Reason), exit, render.OrDash(render.Clean(strings.Join(s.Argv, " "), 60)))
	}
	tw.Flush()
}

func writeSessionInfo(w io.Writer, s *control.SessionInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	exit := "-"
	if s.ExitStatus != nil {
		exit = fmt.Sprint(*s.ExitStatus)
	}
	l := s.Limits
	fmt.Fprintf(tw, "session\t%s\n", s.ID)
	fmt.Fprintf(tw, "state\t%s\n", s.State)
	fmt.Fprintf(tw, "user\t%s\n", render.OrDash(s.User))
	fmt.Fprintf(tw, "tenant\t%s\n", render.OrDash(s.Tenant))
	fmt.Fprintf(tw, "limits\tmemory %d bytes, cpus %g, pids %d, timeout %d ms, disk %d bytes, net rate %d B/s (0 = unlimited)\n",
		l.MemoryBytes, l.CPUs, l.Pids, l.TimeoutMS, l.DiskBytes, l.NetRate)
	fmt.Fprintf(tw, "cgroup\t%s (id %d)\n", render.OrDash(s.CgroupPath), s.CgroupID)
	fmt.Fprintf(tw, "workdir\t%s\n", s.Workdir)
	fmt.Fprintf(tw, "command\t%s\n", render.OrDash(render.Clean(strings.Join(s.Argv, " "), 200)))
	fmt.Fprintf(tw, "created\t%s\n", s.Created.Format(time.RFC3339))
	if !s.Started.IsZero() {
		fmt.Fprintf(tw, "started\t%s\n", s.Started.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "ended\t%s, exit status %s\n", render.OrDash(s.Reason), exit)
	tw.Flush()
}
