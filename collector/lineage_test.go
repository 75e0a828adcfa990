package collector

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// execProc is the exec of pid (a child of ppid) as the decoder hands it to
// the table.
func execProc(pid, ppid int32, comm, exe string, stdin, stdout uint64, argv ...string) *event.Proc {
	return &event.Proc{Pid: pid, PPid: ppid, Comm: comm, Exe: exe, ExePath: exe, StdinPipe: stdin, StdoutPipe: stdout, Argv: argv}
}

// ancestorsOf renders ancestors as "pid:comm:exe", parent first.
func ancestorsOf(a []event.Ancestor) []string {
	var out []string
	for _, x := range a {
		out = append(out, fmt.Sprintf("%d:%s:%s", x.Pid, x.Comm, x.Exe))
	}
	return out
}

// checkLineage checks what the table's bookkeeping must always hold: the
// map and the list hold the same entries, the byte count is their sum, a
// parent counts exactly its children in the table, and an exited entry is
// kept only as someone's parent.
func checkLineage(t *testing.T, l *lineage) {
	t.Helper()
	if l.lru.Len() != len(l.procs) {
		t.Fatalf("lineage: %d in the list, %d in the map", l.lru.Len(), len(l.procs))
	}
	bytes := 0
	children := map[*lineageProc]int{}
	for pid, e := range l.procs {
		if e.pid != pid || e.removed || e.parent == e {
			t.Fatalf("lineage: procs[%d] = pid %d removed %v, its own parent %v", pid, e.pid, e.removed, e.parent == e)
		}
		bytes += e.size
		if e.parent != nil && !e.parent.removed {
			children[e.parent]++
		}
	}
	for _, e := range l.procs {
		if e.children != children[e] {
			t.Fatalf("lineage: pid %d counts %d children, the table holds %d", e.pid, e.children, children[e])
		}
		if e.exited && e.children == 0 {
			t.Fatalf("lineage: pid %d exited and kept with no children", e.pid)
		}
	}
	if bytes != l.bytes || len(l.procs) > maxLineageProcs || l.bytes > maxLineageProcBytes {
		t.Fatalf("lineage: %d entries of %d bytes (counted %d), bounds %d and %d", len(l.procs), bytes, l.bytes, maxLineageProcs, maxLineageProcBytes)
	}
	for _, m := range []*pipeEnds{&l.writers, &l.readers} {
		if m.lru.Len() != len(m.ends) || len(m.ends) > maxPipeEnds || m.bytes > maxPipeEndBytes {
			t.Fatalf("pipe ends: %d listed, %d mapped, %d bytes", m.lru.Len(), len(m.ends), m.bytes)
		}
	}
}

func TestLineageTableAncestors(t *testing.T) {
	l := newLineage()
	// The session's first process: its parent (pid 1) is outside.
	l.fork(100, 1, "sandtrail", 10)
	sh := execProc(100, 1, "sh", "/usr/bin/dash", 0, 0, "sh", "-c", "sh -c true")
	l.exec(sh, 10)
	l.fork(101, 100, "sh", 11)
	// A subshell that never execs: sh's comm and exe, as of its fork.
	l.fork(102, 101, "sh", 12)
	l.fork(103, 102, "sh", 13)
	inner := execProc(101, 100, "sh", "/usr/bin/dash", 0, 0, "sh", "-c", "true")
	l.exec(inner, 11)
	tr := execProc(103, 102, "true", "/usr/bin/true", 0, 0, "true")
	l.exec(tr, 13)
	for _, c := range []struct {
		name string
		p    *event.Proc
		want []string
	}{
		{"the first process", sh, nil},
		{"a child", inner, []string{"100:sh:/usr/bin/dash"}},
		{"through a subshell", tr, []string{"102:sh:/usr/bin/dash", "101:sh:/usr/bin/dash", "100:sh:/usr/bin/dash"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ancestorsOf(c.p.Ancestors); !slices.Equal(got, c.want) {
				t.Errorf("ancestors = %q, want %q", got, c.want)
			}
		})
	}
	checkLineage(t, l)
}

func TestLineageTableMaxAncestors(t *testing.T) {
	l := newLineage()
	for pid := int32(1); pid <= 40; pid++ {
		l.fork(pid, pid-1, "sh", uint64(pid))
	}
	p := execProc(40, 39, "true", "/bin/true", 0, 0)
	l.exec(p, 40)
	if len(p.Ancestors) != event.MaxAncestors || p.Ancestors[0].Pid != 39 || p.Ancestors[event.MaxAncestors-1].Pid != 40-event.MaxAncestors {
		t.Errorf("ancestors = %q, want the %d nearest, 39 first", ancestorsOf(p.Ancestors), event.MaxAncestors)
	}
	checkLineage(t, l)
}

func TestLineageTableExitedAncestor(t *testing.T) {
	l := newLineage()
	l.fork(100, 1, "sh", 10)
	l.exec(execProc(100, 1, "sh", "/usr/bin/dash", 0, 0), 10)
	l.fork(101, 100, "sh", 11)
	l.fork(102, 1, "other", 12) // a process with no children
	l.exit(102, 12)
	if _, ok := l.procs[102]; ok {
		t.Errorf("an exited process with no children is still held")
	}
	// The parent exits first (a double fork): the child, reparented, still
	// names it.
	l.exit(100, 10)
	p := execProc(101, 1, "true", "/bin/true", 0, 0)
	l.exec(p, 11)
	if got, want := ancestorsOf(p.Ancestors), []string{"100:sh:/usr/bin/dash"}; !slices.Equal(got, want) {
		t.Errorf("ancestors after the parent exited = %q, want %q", got, want)
	}
	checkLineage(t, l)
	// The child's exit takes both.
	l.exit(101, 11)
	if len(l.procs) != 0 || l.bytes != 0 {
		t.Errorf("after both exits the table holds %d entries, %d bytes, want none", len(l.procs), l.bytes)
	}
	checkLineage(t, l)
}

func TestLineageTablePidReuse(t *testing.T) {
	t.Run("the parent's pid reused while the child lives", func(t *testing.T) {
		l := newLineage()
		l.fork(100, 1, "sh", 10)
		l.fork(101, 100, "sh", 11)
		l.exit(100, 10)
		// pid 100 is another process now, started after 101.
		l.fork(100, 1, "stranger", 20)
		p := execProc(101, 1, "true", "/bin/true", 0, 0)
		l.exec(p, 11)
		if len(p.Ancestors) != 0 {
			t.Errorf("ancestors = %q, want none: the stranger is not 101's parent", ancestorsOf(p.Ancestors))
		}
		checkLineage(t, l)
	})
	t.Run("an exec of a pid that is another process", func(t *testing.T) {
		l := newLineage()
		l.fork(100, 1, "sh", 10)
		l.fork(101, 100, "sh", 11)
		l.exit(101, 11)
		l.exit(100, 10)
		// The fork of the new 101 was lost; its parent is 100, reused
		// by a process that started after it.
		l.fork(100, 1, "late", 30)
		p := execProc(101, 100, "true", "/bin/true", 0, 0)
		l.exec(p, 25)
		if len(p.Ancestors) != 0 {
			t.Errorf("ancestors = %q, want none: 100 started after 101", ancestorsOf(p.Ancestors))
		}
		checkLineage(t, l)
	})
	t.Run("a stale exit is ignored", func(t *testing.T) {
		l := newLineage()
		l.fork(100, 1, "sh", 10)
		l.fork(101, 100, "sh", 11)
		l.exit(101, 5) // of an older process 101
		p := execProc(101, 100, "true", "/bin/true", 0, 0)
		l.exec(p, 11)
		if got := ancestorsOf(p.Ancestors); !slices.Equal(got, []string{"100:sh:"}) {
			t.Errorf("ancestors = %q, want [100:sh:]", got)
		}
		checkLineage(t, l)
	})
}

func TestLineageTablePipes(t *testing.T) {
	const x, in, out = 7001, 7002, 7003
	for _, c := range []struct {
		name string
		// run execs the two ends and returns the one that execs second
		// with what it must name.
		run func(l *lineage) (second *event.PipePeer, want string)
	}{
		{"the writer execs first and exits", func(l *lineage) (*event.PipePeer, string) {
			l.fork(11, 10, "sh", 1)
			l.exec(execProc(11, 10, "curl", "/usr/bin/curl", in, x, "curl", "-s", "http://127.0.0.1/s.sh"), 1)
			l.exit(11, 1)
			l.fork(12, 10, "sh", 2)
			p := execProc(12, 10, "sh", "/usr/bin/dash", x, out, "sh")
			l.exec(p, 2)
			return p.StdinFrom, `11 curl ["curl" "-s" "http://127.0.0.1/s.sh"]`
		}},
		{"the reader execs first", func(l *lineage) (*event.PipePeer, string) {
			l.exec(execProc(12, 10, "sh", "/usr/bin/dash", x, out, "sh"), 2)
			p := execProc(11, 10, "curl", "/usr/bin/curl", in, x, "curl", "-s", "http://127.0.0.1/s.sh")
			l.exec(p, 1)
			return p.StdoutTo, `12 sh ["sh"]`
		}},
		{"the latest writer", func(l *lineage) (*event.PipePeer, string) {
			l.exec(execProc(11, 10, "curl", "/usr/bin/curl", 0, x, "curl"), 1)
			l.exec(execProc(13, 10, "wget", "/usr/bin/wget", 0, x, "wget"), 3)
			p := execProc(12, 10, "sh", "/usr/bin/dash", x, 0, "sh")
			l.exec(p, 2)
			return p.StdinFrom, `13 wget ["wget"]`
		}},
		{"not its own peer", func(l *lineage) (*event.PipePeer, string) {
			l.exec(execProc(11, 10, "sh", "/usr/bin/dash", x, x, "sh"), 1)
			p := execProc(11, 10, "cat", "/usr/bin/cat", x, x, "cat")
			l.exec(p, 1)
			return p.StdinFrom, "<nil>"
		}},
		{"argv head", func(l *lineage) (*event.PipePeer, string) {
			argv := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
			l.exec(execProc(11, 10, "x", "/x", 0, x, argv...), 1)
			p := execProc(12, 10, "sh", "/usr/bin/dash", x, 0, "sh")
			l.exec(p, 2)
			return p.StdinFrom, `11 x ["a" "b" "c" "d" "e" "f" "g" "h"]`
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLineage()
			p, want := c.run(l)
			got := "<nil>"
			if p != nil {
				got = fmt.Sprintf("%d %s %q", p.Pid, p.Comm, p.Argv)
			}
			if got != want {
				t.Errorf("peer = %s, want %s", got, want)
			}
			checkLineage(t, l)
		})
	}
}

func TestLineageTablePeerIsACopy(t *testing.T) {
	l := newLineage()
	l.exec(execProc(11, 10, "curl", "/usr/bin/curl", 0, 5, "curl", "u"), 1)
	a := execProc(12, 10, "sh", "/bin/sh", 5, 0, "sh")
	l.exec(a, 2)
	a.StdinFrom.Argv[0] = "changed"
	b := execProc(13, 10, "sh", "/bin/sh", 5, 0, "sh")
	l.exec(b, 3)
	if b.StdinFrom == nil || b.StdinFrom.Argv[0] != "curl" {
		t.Errorf("a peer changed in one event changed the table: %+v", b.StdinFrom)
	}
}

func TestLineageTableBounds(t *testing.T) {
	t.Run("processes", func(t *testing.T) {
		l := newLineage()
		l.exec(execProc(1, 0, "sh", "/bin/sh", 0, 0), 1)
		// Children of 1 whose exits were lost: the table stays bounded
		// and the session's shell, named at every exec, stays.
		for pid := int32(2); pid < maxLineageProcs+1000; pid++ {
			l.fork(pid, 1, "sh", uint64(pid))
			l.exec(execProc(pid, 1, "true", "/bin/true", 0, 0), uint64(pid))
		}
		if n := l.Evicted(); n != 999 {
			t.Errorf("evicted = %d, want 999", n)
		}
		p := execProc(maxLineageProcs+2000, 1, "true", "/bin/true", 0, 0)
		l.exec(p, maxLineageProcs+2000)
		if got := ancestorsOf(p.Ancestors); !slices.Equal(got, []string{"1:sh:/bin/sh"}) {
			t.Errorf("ancestors = %q, want the shell, used at every exec", got)
		}
		checkLineage(t, l)
	})
	t.Run("bytes", func(t *testing.T) {
		l := newLineage()
		long := "/" + strings.Repeat("d", 4000)
		for pid := int32(1); pid <= 12000; pid++ {
			l.exec(execProc(pid, 0, "x", long, 0, 0), uint64(pid))
		}
		if l.Evicted() == 0 || l.bytes > maxLineageProcBytes {
			t.Errorf("evicted %d, %d bytes held, want evictions within %d", l.Evicted(), l.bytes, maxLineageProcBytes)
		}
		if e := l.procs[12000]; e == nil || len(e.exe) > maxAncestorExe || !strings.HasPrefix(e.exe, "…") {
			t.Errorf("a %d-byte exe is held as %d bytes, want at most %d starting with …", len(long), len(e.exe), maxAncestorExe)
		}
		checkLineage(t, l)
	})
	t.Run("pipe ends", func(t *testing.T) {
		l := newLineage()
		big := strings.Repeat("a", 2000)
		for i := range uint64(maxPipeEnds + 10) {
			l.exec(execProc(int32(i+1), 0, "w", "/w", 0, 10000+i, "w", big), 1)
			l.exit(int32(i+1), 1)
		}
		if len(l.procs) != 0 {
			t.Errorf("the table holds %d exited processes, want none", len(l.procs))
		}
		if l.Evicted() == 0 || l.writers.bytes > maxPipeEndBytes {
			t.Errorf("evicted %d, %d bytes of writers, want evictions within %d", l.Evicted(), l.writers.bytes, maxPipeEndBytes)
		}
		// The latest writer is still named, its argv cut to the head.
		last := uint64(10000 + maxPipeEnds + 9)
		p := execProc(99999, 0, "sh", "/bin/sh", last, 0, "sh")
		l.exec(p, 2)
		if p.StdinFrom == nil || len(strings.Join(p.StdinFrom.Argv, "")) != maxPeerArgvBytes {
			t.Errorf("stdin_from = %+v, want the last writer with %d bytes of argv", p.StdinFrom, maxPeerArgvBytes)
		}
		checkLineage(t, l)
	})
}

func TestArgvHead(t *testing.T) {
	for _, c := range []struct {
		name string
		argv []string
		want []string
	}{
		{"none", nil, nil},
		{"short", []string{"curl", "-s"}, []string{"curl", "-s"}},
		{"eight", strings.Split("0 1 2 3 4 5 6 7 8 9", " "), strings.Split("0 1 2 3 4 5 6 7", " ")},
		{"bytes", []string{"x", strings.Repeat("a", 2000), "y"}, []string{"x", strings.Repeat("a", maxPeerArgvBytes-1)}},
		{"a character is not split", []string{strings.Repeat("a", maxPeerArgvBytes-1) + "é"}, []string{strings.Repeat("a", maxPeerArgvBytes-1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := argvHead(c.argv); !slices.Equal(got, c.want) {
				t.Errorf("argvHead() = %d args %d bytes, want %d args %d bytes", len(got), len(strings.Join(got, "")), len(c.want), len(strings.Join(c.want, "")))
			}
		})
	}
}

func TestCutFront(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"/bin/sh", 10, "/bin/sh"},
		{"/usr/local/bin/node", 10, "…in/node"},
		{"/é/é/é/x", 8, "…/é/x"},
	} {
		if got := cutFront(c.in, c.n); got != c.want || len(got) > c.n {
			t.Errorf("cutFront(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// FuzzLineage feeds the table forks, execs and exits of a few pids and
// pipes in any order: it never panics, stays within its bounds, keeps its
// bookkeeping (checkLineage: no process is its own parent) and never lists
// more than MaxAncestors.
func FuzzLineage(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 2, 1, 1, 3, 1, 2, 5, 0})
	f.Add([]byte{1, 3, 9, 1, 2, 2, 0, 3, 5, 2, 3, 1, 1, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		l := newLineage()
		for i := 0; i+3 <= len(ops); i += 3 {
			op, pid, arg := ops[i]%3, int32(ops[i+1]%8), ops[i+2]
			start := uint64(arg % 4)
			switch op {
			case 0:
				l.fork(pid, int32(arg%8), "f", start)
			case 1:
				p := execProc(pid, int32(arg%8), "e", "/e", uint64(arg%3), uint64(arg/3%3), "e")
				l.exec(p, start)
				if len(p.Ancestors) > event.MaxAncestors {
					t.Fatalf("%d ancestors", len(p.Ancestors))
				}
			case 2:
				l.exit(pid, start)
			}
			checkLineage(t, l)
		}
	})
}

// BenchmarkLineage is the table's work for one short-lived process of a
// session, at the end of a pipe, three levels below the session's shell:
// its fork, its exec (with its ancestors and pipe peer) and its exit.
func BenchmarkLineage(b *testing.B) {
	l := newLineage()
	l.exec(execProc(100, 1, "bash", "/usr/bin/bash", 0, 0, "bash"), 1)
	l.fork(101, 100, "bash", 2)
	l.exec(execProc(101, 100, "sh", "/usr/bin/dash", 0, 0, "sh", "-c", "x"), 2)
	l.fork(102, 101, "sh", 3)
	l.exec(execProc(102, 101, "make", "/usr/bin/make", 0, 0, "make", "all"), 3)
	l.exec(execProc(103, 102, "curl", "/usr/bin/curl", 0, 9, "curl", "-s", "http://127.0.0.1:8000/s.sh"), 4)
	argv := []string{"cc", "-O2", "-c", "x.c", "-o", "x.o"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pid := int32(1000 + i%30000)
		start := uint64(10 + i)
		l.fork(pid, 102, "make", start)
		p := &event.Proc{Pid: pid, PPid: 102, Comm: "cc", Exe: "/usr/bin/cc", ExePath: "/usr/bin/x86_64-linux-gnu-gcc-12", Argv: argv, StdinPipe: 9}
		l.exec(p, start)
		if len(p.Ancestors) != 3 || p.StdinFrom == nil {
			b.Fatalf("ancestors %d, stdin_from %v", len(p.Ancestors), p.StdinFrom)
		}
		l.exit(pid, start)
	}
}
