package sigma

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

const parentRule = `    sel:
        ParentImage|endswith: /node
        ParentCommandLine|contains: postinstall
        Image|endswith: /sh
    condition: sel
`

// TestParentFields checks that ParentImage and ParentCommandLine come from
// the parent's exec, through fork, and are gone after the parent exits.
func TestParentFields(t *testing.T) {
	set := mustParse(t, ruleYAML("Install script shell", "linux", "process_creation", parentRule))
	t.Run("exec, fork, exec", func(t *testing.T) {
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "scripts/postinstall.js"))
		ev.Observe(fork("s1", 101, 100))
		if got := titles(ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh", "-c", "id"))); !slices.Equal(got, []string{"Install script shell"}) {
			t.Errorf("child of node postinstall: %v, want the rule", got)
		}
	})
	t.Run("exec without ppid uses the fork's", func(t *testing.T) {
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		ev.Observe(fork("s1", 101, 100))
		if got := ev.Observe(exec("s1", 101, 0, "/bin/sh", "sh")); len(got) != 1 {
			t.Errorf("exec with ppid 0 after fork: %d matches, want 1", len(got))
		}
	})
	t.Run("parent of another session", func(t *testing.T) {
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		if got := ev.Observe(exec("s2", 101, 100, "/bin/sh", "sh")); len(got) != 0 {
			t.Errorf("parent pid of another session resolved: %d matches, want 0", len(got))
		}
	})
	t.Run("parent re-execs", func(t *testing.T) {
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		ev.Observe(exec("s1", 100, 1, "/usr/bin/python3", "python3", "postinstall"))
		if got := ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh")); len(got) != 0 {
			t.Errorf("parent that exec'd python still read as node: %d matches", len(got))
		}
	})
	t.Run("parent exited", func(t *testing.T) {
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		ev.Observe(exit("s1", 100))
		if got := ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh")); len(got) != 0 {
			t.Errorf("exited parent resolved: %d matches", len(got))
		}
		if s := ev.Stats(); s.Procs != 1 {
			t.Errorf("Stats().Procs = %d, want 1 (the sh)", s.Procs)
		}
	})
	t.Run("bounded table evicts and counts", func(t *testing.T) {
		ev := NewEvaluator(set, MaxProcs(2))
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		ev.Observe(exec("s1", 200, 1, "/bin/true", "true"))
		ev.Observe(exec("s1", 300, 1, "/bin/true", "true"))
		if got := ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh")); len(got) != 0 {
			t.Errorf("evicted parent resolved: %d matches", len(got))
		}
		s := ev.Stats()
		if s.Procs != 2 || s.ProcEvictions != 2 {
			t.Errorf("Stats() = %+v, want 2 procs and 2 evictions", s)
		}
	})
	t.Run("sandtrail parent fields", func(t *testing.T) {
		set := mustParse(t, ruleYAML("P", "sandtrail", "process", "    sel:\n        kind: process.exec\n        parent.argv: postinstall\n        parent.comm: node\n    condition: sel\n"))
		ev := NewEvaluator(set)
		ev.Observe(exec("s1", 100, 1, "/usr/bin/node", "node", "postinstall"))
		if got := ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh")); len(got) != 1 {
			t.Errorf("parent.argv/parent.comm: %d matches, want 1", len(got))
		}
	})
}

// TestProcTableBytes checks the byte bound: long argvs evict sooner than
// the count bound would, and the charge is returned when a process exits.
func TestProcTableBytes(t *testing.T) {
	set := mustParse(t, ruleYAML("P", "linux", "process_creation", parentRule))
	big := strings.Repeat("x", 10_000)
	ev := NewEvaluator(set, MaxProcBytes(50_000))
	for pid := int32(100); pid < 110; pid++ {
		ev.Observe(exec("s1", pid, 1, "/usr/bin/node", "node", big))
	}
	s := ev.Stats()
	if s.ProcBytes > 50_000 || s.Procs != 2 || s.ProcEvictions != 8 {
		t.Errorf("Stats() = %+v, want at most 50000 bytes, 2 procs, 8 evictions", s)
	}
	before := s.ProcBytes
	ev.Observe(exec("s1", 109, 1, "/bin/true", "true"))
	if s := ev.Stats(); s.Procs != 2 || s.ProcBytes >= before-9_000 {
		t.Errorf("re-exec with a short argv: Stats() = %+v, want 2 procs and about 20000 bytes fewer than %d", s, before)
	}
	ev.Observe(exit("s1", 109))
	ev.Observe(exit("s1", 108))
	if s := ev.Stats(); s.ProcBytes != 0 || s.Procs != 0 {
		t.Errorf("after the exits Stats() = %+v, want an empty table", s)
	}
}

// TestTruncatedCommandLine checks that CommandLine and ParentCommandLine
// end with the recorded tail of a truncated argv, so padding the command
// line past the collector's limit does not hide how it ends.
func TestTruncatedCommandLine(t *testing.T) {
	set, err := Load(os.DirFS("../rules/sigmahq"), "proc_creation_lnx_susp_pipe_shell.yml")
	if err != nil {
		t.Fatal(err)
	}
	e := exec("s1", 100, 1, "/bin/sh", "sh", "-c", "cat /tmp/x "+strings.Repeat("#", 30_000))
	e.Proc.ArgvTruncated = true
	e.Proc.ArgvTail = []string{"####", "| sh"}
	if got := titles(NewEvaluator(set).Observe(e)); !slices.Equal(got, []string{titlePipe}) {
		t.Errorf("truncated argv ending | sh: %v, want [%s]", got, titlePipe)
	}
	e.Proc.ArgvTruncated = false
	if got := NewEvaluator(set).Observe(e); len(got) != 0 {
		t.Errorf("a tail not marked truncated was read: %v", titles(got))
	}
	parent := mustParse(t, ruleYAML("P", "linux", "process_creation", "    sel:\n        ParentCommandLine|endswith: '| sh'\n    condition: sel\n"))
	ev := NewEvaluator(parent)
	e.Proc.ArgvTruncated = true
	ev.Observe(e)
	if got := ev.Observe(exec("s1", 101, 100, "/bin/sh", "sh")); len(got) != 1 {
		t.Errorf("ParentCommandLine of a truncated parent: %d matches, want 1", len(got))
	}
}

// TestSelfFromTable checks that a file or net event's process, which the
// kernel names only by pid, gets Image, CommandLine and CurrentDirectory
// from its exec, and that an exec never takes them from the table: an
// exec with an empty argv does not borrow the command line the process had
// before it.
func TestSelfFromTable(t *testing.T) {
	set := mustParse(t, ruleYAML("Curl writes tmp", "linux", "file_event",
		"    sel:\n        Image|endswith: /curl\n        CommandLine|contains: ' -o /tmp/'\n        CurrentDirectory: /home/agent\n    condition: sel\n")+
		"---\n"+ruleYAML("Curl exec", "linux", "process_creation", "    sel:\n        CommandLine|contains: ' -o /tmp/'\n    condition: sel\n"))
	ev := NewEvaluator(set)
	ev.Observe(exec("s1", 300, 1, "/usr/bin/curl", "curl", "-o", "/tmp/x", "http://h/x"))
	w := fileEv("s1", "file.create", "create", "/tmp/x")
	w.Proc = &event.Proc{Pid: 300, Comm: "curl"}
	if got := titles(ev.Observe(w)); !slices.Equal(got, []string{"Curl writes tmp"}) {
		t.Errorf("file.create by pid 300: %v, want [Curl writes tmp]", got)
	}
	w.Proc.Pid = 301
	if got := ev.Observe(w); len(got) != 0 {
		t.Errorf("file.create by an unknown pid: %v, want none", titles(got))
	}
	// pid 300 execs again with argc 0.
	e := exec("s1", 300, 1, "/usr/bin/curl")
	e.Proc.Argv = nil
	if got := ev.Observe(e); len(got) != 0 {
		t.Errorf("exec with an empty argv matched the previous command line: %v", titles(got))
	}
}
