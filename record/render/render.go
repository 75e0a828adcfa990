// Package render describes events for people: one line of a table for an
// event (Summary), a lifecycle, limit, loss or alert step (Step), a limit
// hit (Limit), a command line (ShellJoin), and a kernel collector's
// capabilities (KernelWithout, KernelLine, Requirement, Nearest). Every
// string that came from the record is untrusted (an agent chose it) and
// goes through Clean, which keeps a line one line and escape sequences
// inert. OrDash fills an empty cell of a table; event.Clip bounds a quoted
// value for an error message.
package render

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandtrail/sandtrail/record/event"
)

// Clean makes an untrusted string safe for one line of a terminal: control
// characters (escape sequences included) and invalid UTF-8 are escaped,
// and it is cut at max runes.
func Clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if n >= max {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i-1])
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// OrDash returns s, or "-" when s is empty: the cell of a table that has
// no value.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Summary is a one-line account of an event's sub-object and process, for
// a table.
func Summary(ev *event.Event) string {
	var parts []string
	switch {
	case ev.File != nil:
		parts = file(ev.File)
	case ev.Net != nil:
		parts = network(ev.Net)
	case ev.Pkg != nil:
		parts = pkg(ev.Pkg)
	default:
		parts = other(ev)
	}
	if p := ev.Proc; p != nil {
		parts = append(parts, proc(ev, p))
	}
	return strings.Join(parts, " ")
}

// adder appends formatted parts.
type adder []string

func (a *adder) add(format string, v ...any) { *a = append(*a, fmt.Sprintf(format, v...)) }

func file(f *event.File) []string {
	var a adder
	a.add("%s %s", f.Op, Clean(f.Path, 120))
	if f.NewPath != "" {
		a.add("-> %s", Clean(f.NewPath, 120))
	}
	if f.Target != "" {
		a.add("-> %s", Clean(f.Target, 120))
	}
	if f.Errno != "" {
		a.add("(%s)", Clean(f.Errno, 16))
	}
	return a
}

func network(n *event.Net) []string {
	var a adder
	if n.DNS != nil {
		a.add("dns %s %s", Clean(n.DNS.QType, 8), Clean(n.DNS.Query, 80))
		if n.DNS.RCode != "" {
			a.add("%s", Clean(n.DNS.RCode, 16))
		}
		for i, ans := range n.DNS.Answers {
			if i == 3 {
				a.add("…")
				break
			}
			a.add("%s", Clean(ans.Data, 64))
		}
	} else {
		a.add("%s", Clean(n.Op, 16))
		if n.Proto != "" {
			a.add("%s", Clean(n.Proto, 8))
		}
		if n.Domain != "" {
			a.add("%s", Clean(n.Domain, 80))
		}
		if n.DstIP != "" {
			a.add("%s", Clean(HostPort(n.DstIP, n.DstPort), 64))
		}
		if n.UnixPath != "" {
			a.add("%s", Clean(n.UnixPath, 80))
		}
		if n.Family != "" && n.Op == "socket" {
			a.add("%s/%s", Clean(n.Family, 16), Clean(n.SockType, 16))
			if n.Errno != "" {
				a.add("(%s)", Clean(n.Errno, 16))
			}
		}
		if n.BytesOut+n.BytesIn > 0 {
			a.add("out %d in %d", n.BytesOut, n.BytesIn)
		}
	}
	if n.Verdict != "" {
		a.add("[%s]", Clean(n.Verdict, 16))
	}
	return a
}

func pkg(p *event.Pkg) []string {
	var a adder
	v := p.Resolved
	if v == "" {
		v = p.Requested
	}
	a.add("%s %s@%s", Clean(p.Ecosystem, 16), Clean(p.Name, 80), Clean(v, 40))
	if p.Requested != "" && p.Requested != p.Resolved {
		a.add("(asked %s)", Clean(p.Requested, 40))
	}
	if p.Verified != nil {
		if *p.Verified {
			a.add("verified")
		} else {
			a.add("UNVERIFIED")
		}
	}
	if p.Verdict != "" {
		a.add("[%s]", Clean(p.Verdict, 16))
	}
	return a
}

// other describes the sub-objects other than file, net and pkg.
func other(ev *event.Event) []string {
	var a adder
	switch {
	case ev.Session != nil:
		s := ev.Session
		a.add("%s", Clean(s.Op, 16))
		if s.Reason != "" {
			a.add("reason=%s", Clean(s.Reason, 32))
		}
		if s.ExitStatus != nil {
			a.add("exit=%d", *s.ExitStatus)
		}
		if s.Image != "" {
			a.add("image=%s", Clean(s.Image, 60))
		}
	case ev.Alert != nil:
		al := ev.Alert
		a.add("[%s] %s: %s", Clean(al.Level, 16), Clean(al.RuleID, 40), Clean(al.Title, 80))
	case ev.Limit != nil:
		l := ev.Limit
		a.add("%s %d/%d %s %s", Clean(l.Type, 24), l.Measured, l.Configured, Clean(l.Unit, 8), Clean(l.Action, 16))
	case ev.Tool != nil:
		t := ev.Tool
		a.add("%s %s %dms", Clean(t.Name, 40), Clean(t.Status, 16), t.DurationMS)
		if t.InputSummary != "" {
			a.add("%s", Clean(t.InputSummary, 80))
		}
	case ev.Model != nil:
		a.add("tokens=%d %s", ev.Model.Tokens, Clean(ev.Model.InputSummary, 80))
	case ev.Loss != nil:
		a.add("lost %d from %s", ev.Loss.Count, Clean(ev.Loss.Source, 32))
	case ev.Kernel != nil:
		a.add("%s", KernelLine(ev.Kernel))
	case ev.Journal != nil:
		a.add("%s", Clean(ev.Journal.Detail, 100))
	case ev.Retention != nil:
		a = retention(ev.Retention)
	}
	return a
}

// retention describes a prune (what it removed), or a hold or release
// (of which session, by whom, why).
func retention(r *event.Retention) adder {
	var a adder
	if r.Op == "prune" {
		a.add("pruned %d entries: %d sessions, %d of no session (hot window %d days)", r.Entries, len(r.Sessions), r.Sessionless, r.HotDays)
	} else {
		a.add("%s %s", Clean(r.Op, 16), Clean(r.Session, 64))
	}
	if r.Actor != "" {
		a.add("by %s", Clean(r.Actor, 40))
	}
	if r.Reason != "" {
		a.add("reason=%q", Clean(r.Reason, 80))
	}
	return a
}

// proc describes the event's process: its pid, and its argv for an exec
// (and for events that are not about a file or a connection), or its
// executable, and the processes at the other ends of its stdin and stdout
// pipes when the exec named them.
func proc(ev *event.Event, p *event.Proc) string {
	s := fmt.Sprintf("pid=%d", p.Pid)
	if ev.Kind == event.KindExec || ev.File == nil && ev.Net == nil && len(p.Argv) > 0 {
		s += " " + Clean(strings.Join(p.Argv, " "), 100)
	} else if p.Exe != "" {
		s += " " + Clean(p.Exe, 60)
	}
	if q := p.StdinFrom; q != nil {
		s += fmt.Sprintf(" stdin<-%s[%d]", Clean(q.Comm, 16), q.Pid)
	}
	if q := p.StdoutTo; q != nil {
		s += fmt.Sprintf(" stdout->%s[%d]", Clean(q.Comm, 16), q.Pid)
	}
	if p.ExitCode != nil {
		s += fmt.Sprintf(" exit=%d", *p.ExitCode)
	}
	return s
}

// HostPort joins an address and a port, bracketing an IPv6 address; a
// zero port is left out.
func HostPort(ip string, port uint16) string {
	if port == 0 {
		return ip
	}
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// Step describes a lifecycle, limit, loss or alert event in a line.
func Step(e *event.Event) string {
	switch {
	case e.Session != nil:
		s := e.Session
		var parts []string
		add := func(k, v string) {
			if v != "" {
				parts = append(parts, k+"="+Clean(v, 80))
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
			lim := fmt.Sprintf("limits=memory:%d,cpus:%g,pids:%d,timeout_ms:%d,disk:%d", l.MemoryBytes, l.CPUs, l.Pids, l.TimeoutMS, l.DiskBytes)
			if l.NetRate > 0 {
				lim += fmt.Sprintf(",net_rate:%d", l.NetRate)
				if l.NetRateAction != "" {
					lim += ":" + l.NetRateAction
				}
			}
			parts = append(parts, lim)
		}
		if e.Proc != nil && e.Proc.Pid != 0 {
			parts = append(parts, fmt.Sprintf("pid=%d", e.Proc.Pid))
		}
		return strings.Join(parts, " ")
	case e.Limit != nil:
		return Limit(e)
	case e.Loss != nil:
		s := fmt.Sprintf("%d lost at %s", e.Loss.Count, Clean(e.Loss.Source, 40))
		if e.Loss.LostKind != "" {
			s += " (" + Clean(e.Loss.LostKind, 40) + ")"
		}
		return s
	case e.Alert != nil:
		return fmt.Sprintf("%s %s: %s", e.Alert.Level, Clean(e.Alert.RuleID, 60), Clean(e.Alert.Title, 120))
	}
	return ""
}

// Limit describes one limit.hit: the type, the measured and configured
// values with their unit, the action and the process.
func Limit(e *event.Event) string {
	l := e.Limit
	s := fmt.Sprintf("%s: measured %s, configured %s, %s", l.Type, unitValue(l.Measured, l.Unit), unitValue(l.Configured, l.Unit), l.Action)
	if e.Proc != nil && e.Proc.Pid != 0 {
		s += fmt.Sprintf(", pid %d", e.Proc.Pid)
		if e.Proc.Comm != "" {
			s += " (" + Clean(e.Proc.Comm, 32) + ")"
		}
	}
	return s
}

func unitValue(v int64, unit string) string {
	if unit == "" {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%d %s", v, unit)
}

// ShellJoin quotes argv as a shell would need it, cleaned of control
// characters and cut to max runes.
func ShellJoin(argv []string, max int) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		a = Clean(a, max)
		if a == "" || strings.ContainsAny(a, " \t'\"\\$`;&|<>()*?[]{}~#!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return Clean(strings.Join(parts, " "), max)
}
