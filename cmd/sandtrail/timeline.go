package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
)

func newTimelineCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "timeline SESSION [--format text|json]",
		Short: "Print a session's process tree and its lifecycle and limit events",
		Long: `timeline reads one session's events from the index (caught up with the
journal first) and prints:

  - the process tree: every process the kernel collector saw, its children
    indented beneath it, with its argv (masked as recorded), cwd, uid, exit
    code or signal, and how long it ran;
  - the session's lifecycle (create, start, pause, resume, terminate,
    cleanup), its limit hits, losses and alerts, in order.

A process whose fork or exit was not recorded (it started before the
session's cgroup was watched, or a loss) is still shown, under its parent
when the parent is known.`,
		Example: `  sandtrail timeline 01jd2k3m4n5p6q7r
  sandtrail timeline 01jd2k3m4n5p6q7r --format json | jq '.processes'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return usageErr(fmt.Errorf("--format %q: want text or json", format))
			}
			id, err := query.ParseSession(args[0])
			if err != nil {
				return usageErr(err)
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ix, err := openIndex(cmd.Context(), cfg, cfg.logger())
			if err != nil {
				return err
			}
			defer ix.Close()
			tl, err := buildTimeline(cmd.Context(), ix, id)
			if err != nil {
				return err
			}
			if tl.Events == 0 {
				return usageErr(fmt.Errorf("no events recorded for session %q", id))
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(tl)
			}
			tl.writeText(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// timeline is one session's process tree and its other notable events.
type timeline struct {
	SessionID string     `json:"session_id"`
	Events    int        `json:"events"`
	Processes []*procRow `json:"processes"`
	// Steps are the lifecycle, limit, loss and alert events, in order.
	Steps []step `json:"steps"`
}

// procRow is one process of the tree.
type procRow struct {
	Pid       int32      `json:"pid"`
	PPid      int32      `json:"ppid,omitempty"`
	Start     time.Time  `json:"start,omitzero"`
	End       time.Time  `json:"end,omitzero"`
	Argv      []string   `json:"argv,omitempty"`
	Truncated bool       `json:"argv_truncated,omitempty"`
	Exe       string     `json:"exe,omitempty"`
	Comm      string     `json:"comm,omitempty"`
	Cwd       string     `json:"cwd,omitempty"`
	UID       *uint32    `json:"uid,omitempty"`
	Execs     int        `json:"execs"`
	Failed    []string   `json:"exec_failed,omitempty"`
	ExitCode  *int32     `json:"exit_code,omitempty"`
	Signal    int32      `json:"signal,omitempty"`
	Exited    bool       `json:"exited"`
	Children  []*procRow `json:"children,omitempty"`
	parent    *procRow
	firstSeen uint64
}

// DurationMS is how long the process ran, when both ends are known.
func (p *procRow) duration() (time.Duration, bool) {
	if p.Start.IsZero() || p.End.IsZero() {
		return 0, false
	}
	return p.End.Sub(p.Start), true
}

type step struct {
	Seq    uint64    `json:"seq"`
	TS     time.Time `json:"ts"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
}

// buildTimeline reads the session's events from the index.
func buildTimeline(ctx context.Context, ix *index.Index, id string) (*timeline, error) {
	tl := &timeline{SessionID: id, Processes: []*procRow{}, Steps: []step{}}
	byPid := map[int32]*procRow{}
	var all []*procRow
	node := func(pid int32, seq uint64, start time.Time) *procRow {
		p := byPid[pid]
		// A pid seen again after its exit, or with another start time,
		// is a new process.
		if p != nil && !p.Exited && (start.IsZero() || p.Start.IsZero() || absDur(p.Start.Sub(start)) < time.Millisecond) {
			if p.Start.IsZero() {
				p.Start = start
			}
			return p
		}
		p = &procRow{Pid: pid, Start: start, firstSeen: seq}
		byPid[pid] = p
		all = append(all, p)
		return p
	}
	err := ix.Each(ctx, query.Filter{Session: id}, func(h index.Hit) error {
		var e event.Event
		if err := decodeHit(h.Raw, &e); err != nil {
			return nil
		}
		tl.Events++
		pr := e.Proc
		switch {
		case e.Kind == "process.fork" && pr != nil:
			p := node(pr.Pid, h.Seq, pr.StartTS)
			p.PPid = pr.PPid
		case e.Kind == "process.exec" && pr != nil:
			p := node(pr.Pid, h.Seq, pr.StartTS)
			p.PPid, p.Argv, p.Truncated, p.Exe, p.Comm, p.Cwd, p.UID = pr.PPid, pr.Argv, pr.ArgvTruncated, pr.Exe, pr.Comm, pr.Cwd, pr.UID
			p.Execs++
		case e.Kind == "process.exec_failed" && pr != nil:
			p := node(pr.Pid, h.Seq, pr.StartTS)
			name := pr.Exe
			if name == "" && len(pr.Argv) > 0 {
				name = pr.Argv[0]
			}
			p.Failed = append(p.Failed, clean(name, 80)+" ("+pr.Errno+")")
		case e.Kind == "process.exit" && pr != nil:
			p := node(pr.Pid, h.Seq, pr.StartTS)
			if p.PPid == 0 {
				p.PPid = pr.PPid
			}
			if p.Comm == "" {
				p.Comm = pr.Comm
			}
			p.ExitCode, p.Signal, p.Exited, p.End = pr.ExitCode, pr.Signal, true, e.TS
		case e.Category() == "session" || e.Category() == "limit" || e.Category() == "collector" || e.Category() == "alert":
			tl.Steps = append(tl.Steps, step{Seq: h.Seq, TS: e.TS, Kind: e.Kind, Detail: stepDetail(&e)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", id, err)
	}
	// Link each process under the latest process with its parent's pid
	// that was seen before it.
	sort.SliceStable(all, func(i, j int) bool { return all[i].firstSeen < all[j].firstSeen })
	seen := map[int32]*procRow{}
	for _, p := range all {
		if par := seen[p.PPid]; par != nil && p.PPid != 0 && par != p {
			p.parent = par
			par.Children = append(par.Children, p)
		} else {
			tl.Processes = append(tl.Processes, p)
		}
		seen[p.Pid] = p
	}
	return tl, nil
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// stepDetail describes a lifecycle, limit, loss or alert event in a line.
func stepDetail(e *event.Event) string {
	switch {
	case e.Session != nil:
		s := e.Session
		var parts []string
		add := func(k, v string) {
			if v != "" {
				parts = append(parts, k+"="+clean(v, 80))
			}
		}
		add("user", s.User)
		add("tenant", s.Tenant)
		add("template", s.Template)
		add("image", s.Image)
		add("host", s.Host)
		add("reason", s.Reason)
		add("actor", s.Actor)
		if s.ExitStatus != nil {
			add("exit_status", strconv.Itoa(int(*s.ExitStatus)))
		}
		add("fs_state", s.FSState)
		add("snapshot_sha256", s.SnapshotSHA256)
		if l := s.Limits; l != nil {
			parts = append(parts, fmt.Sprintf("limits=memory:%d,cpus:%g,pids:%d,timeout_ms:%d,disk:%d", l.MemoryBytes, l.CPUs, l.Pids, l.TimeoutMS, l.DiskBytes))
		}
		if e.Proc != nil && e.Proc.Pid != 0 {
			parts = append(parts, fmt.Sprintf("pid=%d", e.Proc.Pid))
		}
		return strings.Join(parts, " ")
	case e.Limit != nil:
		return limitLine(e)
	case e.Loss != nil:
		s := fmt.Sprintf("%d lost at %s", e.Loss.Count, clean(e.Loss.Source, 40))
		if e.Loss.LostKind != "" {
			s += " (" + clean(e.Loss.LostKind, 40) + ")"
		}
		return s
	case e.Alert != nil:
		return fmt.Sprintf("%s %s: %s", e.Alert.Level, clean(e.Alert.RuleID, 60), clean(e.Alert.Title, 120))
	}
	return ""
}

func (tl *timeline) writeText(w io.Writer) {
	fmt.Fprintf(w, "session %s: %d events\n\nprocesses\n", tl.SessionID, tl.Events)
	if len(tl.Processes) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, p := range tl.Processes {
		writeProc(w, p, 1)
	}
	fmt.Fprintln(w, "\nlifecycle and limits")
	if len(tl.Steps) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, s := range tl.Steps {
		fmt.Fprintf(w, "  %s  %-18s %s\n", s.TS.Local().Format("15:04:05.000"), s.Kind, s.Detail)
	}
}

func writeProc(w io.Writer, p *procRow, depth int) {
	ind := strings.Repeat("  ", depth)
	cmd := shellJoin(p.Argv, 160)
	if cmd == "" {
		cmd = "[" + clean(p.Comm, 32) + "]"
	}
	if p.Truncated {
		cmd += " …(argv truncated)"
	}
	var attrs []string
	if p.Cwd != "" {
		attrs = append(attrs, "cwd="+clean(p.Cwd, 80))
	}
	if p.UID != nil {
		attrs = append(attrs, fmt.Sprintf("uid=%d", *p.UID))
	}
	switch {
	case p.Signal != 0:
		attrs = append(attrs, fmt.Sprintf("killed by signal %d", p.Signal))
	case p.ExitCode != nil:
		attrs = append(attrs, fmt.Sprintf("exit %d", *p.ExitCode))
	case !p.Exited:
		attrs = append(attrs, "no exit recorded")
	}
	if d, ok := p.duration(); ok {
		attrs = append(attrs, d.Round(time.Microsecond).String())
	}
	for _, f := range p.Failed {
		attrs = append(attrs, "exec failed: "+f)
	}
	start := "            "
	if !p.Start.IsZero() {
		start = p.Start.Local().Format("15:04:05.000")
	}
	fmt.Fprintf(w, "%s %s%d %s  %s\n", start, ind, p.Pid, cmd, strings.Join(attrs, "  "))
	for _, c := range p.Children {
		writeProc(w, c, depth+1)
	}
}

// shellJoin quotes argv as a shell would need it, cleaned of control
// characters and cut to max runes.
func shellJoin(argv []string, max int) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		a = clean(a, max)
		if a == "" || strings.ContainsAny(a, " \t'\"\\$`;&|<>()*?[]{}~#!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return clean(strings.Join(parts, " "), max)
}
