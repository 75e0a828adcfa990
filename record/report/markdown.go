package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/sandtrail/sandtrail/record/render"
)

// maxMarkdownRows bounds each table of the Markdown report: a pull
// request comment is read, not searched (the HTML report has every row).
const maxMarkdownRows = 30

// WriteMarkdown writes r as Markdown for a pull request comment: the line,
// the alerts, the packages, the blocked and sensitive activity, the limit
// hits, the tool calls and the journal's status.
func WriteMarkdown(w io.Writer, r *Report) error {
	m := &mdWriter{w: w}
	m.printf("### sandtrail: session %s\n\n", md(r.SessionID, 64))
	m.printf("%s\n", md(Line(r), 600))
	m.alerts(r)
	m.packages(r)
	m.network(r)
	m.files(r)
	m.table("Resource limits and losses", []string{"time", "kind", "detail"}, len(r.Limits), func(i int) []string {
		s := r.Limits[i]
		return []string{s.TS.UTC().Format("15:04:05.000"), s.Kind, s.Detail}
	})
	m.table("Tool invocations and model calls", []string{"kind", "name", "server", "status", "ms"}, len(r.Tools), func(i int) []string {
		t := r.Tools[i]
		return []string{t.Kind, t.Name, t.Server, t.Status, fmt.Sprint(t.DurationMS)}
	})
	j := r.Journal
	m.printf("\n**Journal**: %s from seq %d, %d entries, %d covered by a signed checkpoint", md(render.OrDash(j.Status), 32), j.VerifiedFrom, j.Entries, j.Covered)
	if j.Error != "" {
		m.printf(" (%s)", md(j.Error, 200))
	}
	m.printf("\n")
	return m.err
}

// alerts writes the alerts table.
func (m *mdWriter) alerts(r *Report) {
	m.table("Alerts", []string{"level", "rule", "title", "package", "events"}, len(r.Alerts), func(i int) []string {
		a := r.Alerts[i]
		refs := make([]string, 0, len(a.Refs))
		for _, s := range a.Refs {
			refs = append(refs, fmt.Sprintf("#%d", s))
		}
		return []string{a.Level, a.Rule, a.Title, a.Package, strings.Join(refs, " ")}
	})
}

// packages writes the packages table.
func (m *mdWriter) packages(r *Report) {
	m.table("Packages", []string{"ecosystem", "name", "requested", "resolved", "verdict", "mirror", "source"}, len(r.Packages), func(i int) []string {
		p := r.Packages[i]
		return []string{p.Ecosystem, p.Name, p.Requested, p.Version, p.Seen, p.Outcome, p.SourceURL}
	})
}

// network writes the blocked destinations.
func (m *mdWriter) network(r *Report) {
	var blocked []Destination
	for _, d := range r.Network.Destinations {
		if d.Blocked > 0 {
			blocked = append(blocked, d)
		}
	}
	m.table("Blocked connections", []string{"destination", "domain", "attempts", "reason"}, len(blocked), func(i int) []string {
		d := blocked[i]
		return []string{d.Proto + " " + render.HostPort(d.IP, d.Port), d.Domain, fmt.Sprint(d.Blocked), d.Reason}
	})
}

// files writes the sensitive paths.
func (m *mdWriter) files(r *Report) {
	var sens []Path
	for _, p := range r.Files.Paths {
		if p.Sensitive {
			sens = append(sens, p)
		}
	}
	m.table("Sensitive files", []string{"path", "operations", "errors"}, len(sens), func(i int) []string {
		p := sens[i]
		return []string{p.Path, strings.Join(p.Ops, ", "), strings.Join(p.Errnos, ", ")}
	})
}

// mdWriter writes Markdown, keeping the first error.
type mdWriter struct {
	w   io.Writer
	err error
}

// printf writes unless an earlier write failed.
func (m *mdWriter) printf(format string, v ...any) {
	if m.err == nil {
		_, m.err = fmt.Fprintf(m.w, format, v...)
	}
}

// table writes a titled table of n rows (at most maxMarkdownRows, saying
// how many more), each cell escaped; no table when n is 0.
func (m *mdWriter) table(title string, head []string, n int, row func(int) []string) {
	if n == 0 {
		return
	}
	m.printf("\n**%s** (%d)\n\n| %s |\n|%s\n", title, n, strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	for i := range min(n, maxMarkdownRows) {
		cells := row(i)
		for j, c := range cells {
			cells[j] = md(c, 120)
		}
		m.printf("| %s |\n", strings.Join(cells, " | "))
	}
	if n > maxMarkdownRows {
		m.printf("\n%d more in the HTML report.\n", n-maxMarkdownRows)
	}
}

// md is an untrusted value for one line of Markdown: cleaned of control
// characters, cut at max runes, and set as a code span, in which Markdown
// reads no emphasis, link, autolink (www.x, https://x), mention, image or
// HTML. Its fence is longer than any run of backticks in the value, and a
// "|" is escaped, which a table reads as part of the cell (GFM); "" stays
// empty.
func md(s string, n int) string {
	s = render.Clean(s, n)
	if s == "" {
		return ""
	}
	run, longest := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	s = strings.ReplaceAll(s, "|", `\|`)
	return fence + " " + s + " " + fence
}
