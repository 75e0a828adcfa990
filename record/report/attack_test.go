package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// session builds a report of evs, numbered from 1, in session S1.
func session(t *testing.T, evs []*event.Event, opts ...Option) *Report {
	t.Helper()
	b := New("S1", opts...)
	for i, e := range evs {
		e.SessionID = "S1"
		b.Add(uint64(i+1), e)
	}
	return b.Report()
}

func fileEvent(op, path string, f func(*event.File)) *event.Event {
	e := &event.Event{V: event.SchemaVersion, TS: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Kind: "file." + op,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: 7}, File: &event.File{Op: op, Path: path}}
	if f != nil {
		f(e.File)
	}
	return e
}

// TestNoiseCannotHide: what an agent could do beneath a package manager's
// cache to hide real activity is listed: a hard link to a key, a rename
// out of the cache, a path that only looks like a scratch directory, a
// write of the manager's own code, and what a symbolic link the session
// made in a cache leads to. The cache's own bookkeeping is still hidden.
func TestNoiseCannotHide(t *testing.T) {
	r := session(t, []*event.Event{
		fileEvent("create", "/home/a/.npm/_cacache/index-v5/x", nil),
		fileEvent("link", "/home/a/.npm/_cacache/k", func(f *event.File) { f.Target = "/home/a/.ssh/id_rsa" }),
		fileEvent("read", "/home/a/.npm/_cacache/k", nil),
		fileEvent("rename", "/home/a/.npm/_cacache/tmp/x", func(f *event.File) { f.NewPath = "/home/a/.bashrc" }),
		fileEvent("create", "/work/project/tmp/pip-evil/payload.sh", nil),
		fileEvent("write", "/usr/lib/node_modules/npm/lib/cli.js", nil),
		fileEvent("link", "/home/a/.npm/_cacache/d", func(f *event.File) { f.Target = "/home/a/.ssh"; f.Symlink = true }),
		fileEvent("delete", "/home/a/.npm/_cacache/d/authorized_keys", nil),
	})
	var got []string
	for _, p := range r.Files.Paths {
		got = append(got, p.Path+"|"+strings.Join(p.Ops, ","))
	}
	want := []string{
		"/home/a/.npm/_cacache/k|link", "/home/a/.npm/_cacache/d|link", // sensitive: their targets
		"/home/a/.npm/_cacache/k|read", "/home/a/.npm/_cacache/tmp/x|rename", "/work/project/tmp/pip-evil/payload.sh|create",
		"/usr/lib/node_modules/npm/lib/cli.js|write", "/home/a/.npm/_cacache/d/authorized_keys|delete",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || r.Files.Hidden != 1 {
		t.Errorf("files = %q, hidden %d\nwant %q, hidden 1", got, r.Files.Hidden, want)
	}
}

// TestDeepChain: a chain of processes each the child of the last (one
// alive at a time, so no pids limit stops it) renders in time and space
// linear in its length: the page's tree nests at most maxTreeDepth deep,
// and the chart draws chartMaxRows rows.
func TestDeepChain(t *testing.T) {
	const n = 20_000
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var evs []*event.Event
	for i := range n {
		pid := int32(100 + i)
		evs = append(evs, &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(i) * time.Microsecond), Kind: event.KindExec,
			Source: event.SourceKernel, Proc: &event.Proc{Pid: pid, PPid: pid - 1, Argv: []string{"sh"}, StartTS: t0.Add(time.Duration(i) * time.Microsecond)}})
	}
	start := time.Now()
	r := session(t, evs)
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a chain of %d took %v", n, d)
	}
	if nest := strings.Count(page.String(), "<details open"); nest != maxTreeDepth {
		t.Errorf("the tree nests %d deep, want %d", nest, maxTreeDepth)
	}
	if page.Len() > 400*n {
		t.Errorf("the page is %d bytes for %d processes", page.Len(), n)
	}
	if c := r.Chart(); len(c.Rows) != chartMaxRows || c.More != n-chartMaxRows {
		t.Errorf("chart rows %d, more %d; want %d, %d", len(c.Rows), c.More, chartMaxRows, n-chartMaxRows)
	}
}

// TestAgentTimes: a tool call the agent dated long ago neither squashes
// the processes' bars nor breaks the axis: the chart spans the session as
// the host and the kernel saw it, and the mark sits at its edge, saying so.
func TestAgentTimes(t *testing.T) {
	evs := knownSession()
	for _, e := range evs {
		if e.Tool != nil {
			e.TS = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		}
	}
	b := New("S1")
	for i, e := range evs {
		b.Add(uint64(i+1), e)
	}
	c := b.Report().Chart()
	for _, row := range c.Rows {
		for _, br := range row.Bars {
			if row.Label == "100 sh" && br.W < 300 {
				t.Errorf("sh's bar is %.1f wide: the agent's time squashed it", br.W)
			}
			if br.Class == "tool" && !strings.Contains(br.Title, "outside the session") {
				t.Errorf("the tool mark's title is %q", br.Title)
			}
		}
	}
	for _, tk := range c.Ticks {
		if strings.Contains(tk.Label, "-") {
			t.Errorf("tick %q", tk.Label)
		}
	}
}
