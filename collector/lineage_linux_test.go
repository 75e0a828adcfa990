//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// runInSession runs /bin/sh ARGS as nobody in a fresh watched cgroup, with
// stdin when it is not nil, and returns the session's exec events and the
// shell's pid.
func runInSession(t *testing.T, sid string, stdin func(w *os.File), args ...string) ([]*event.Event, int32) {
	t.Helper()
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	var w *os.File
	if stdin != nil {
		rd, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin, w = rd, wr
		defer rd.Close()
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sh %q: %v", args, err)
	}
	if stdin != nil {
		stdin(w)
		w.Close()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sh %q: %v\n%s", args, err, out.String())
	}
	if s := r.c.Stats(); s.LineageEvicted != 0 {
		t.Errorf("Stats().LineageEvicted = %d, want 0", s.LineageEvicted)
	}
	return inSession(r.stop(t), sid, event.KindExec), int32(cmd.Process.Pid)
}

// execNamed returns the one exec whose argv is argv.
func execNamed(t *testing.T, execs []*event.Event, argv ...string) *event.Proc {
	t.Helper()
	var hit []*event.Proc
	for _, ev := range execs {
		if slices.Equal(ev.Proc.Argv, argv) {
			hit = append(hit, ev.Proc)
		}
	}
	if len(hit) != 1 {
		t.Fatalf("execs of %q = %d, want 1 (execs: %v)", argv, len(hit), kinds(execs))
	}
	return hit[0]
}

// peerString renders a pipe peer as "pid comm argv".
func peerString(p *event.PipePeer) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%d %s %q", p.Pid, p.Comm, p.Argv)
}

// checkPiped checks that of the two ends of a pipe, the writer w and the
// reader r, the one that exec'd second names the other, and the first names
// no one.
func checkPiped(t *testing.T, execs []*event.Event, w, r *event.Proc) {
	t.Helper()
	at := func(p *event.Proc) int {
		return slices.IndexFunc(execs, func(ev *event.Event) bool { return ev.Proc == p })
	}
	peerOf := func(p *event.Proc) string {
		return peerString(&event.PipePeer{Pid: p.Pid, Comm: p.Comm, Argv: argvHead(p.Argv)})
	}
	if at(w) < at(r) {
		if got, want := peerString(r.StdinFrom), peerOf(w); got != want || w.StdoutTo != nil {
			t.Errorf("%s exec'd second: its stdin_from = %s, want %s; %s's stdout_to = %s, want none", r.Comm, got, want, w.Comm, peerString(w.StdoutTo))
		}
		t.Logf("the reader %s exec'd second: stdin_from %s", r.Comm, peerString(r.StdinFrom))
		return
	}
	if got, want := peerString(w.StdoutTo), peerOf(r); got != want || r.StdinFrom != nil {
		t.Errorf("%s exec'd second: its stdout_to = %s, want %s; %s's stdin_from = %s, want none", w.Comm, got, want, r.Comm, peerString(r.StdinFrom))
	}
	t.Logf("the writer %s exec'd second: stdout_to %s", w.Comm, peerString(w.StdoutTo))
}

// TestLineagePipeline: in `/bin/echo hi | /bin/cat`, of echo and cat the
// one that execs second names the other (cat's stdin_from, or echo's
// stdout_to), with its argv.
func TestLineagePipeline(t *testing.T) {
	requireKernel(t)
	execs, _ := runInSession(t, "sess-lineage-pipe", nil, "-c", "/bin/echo hi | /bin/cat >/dev/null")
	echo, cat := execNamed(t, execs, "/bin/echo", "hi"), execNamed(t, execs, "/bin/cat")
	checkPiped(t, execs, echo, cat)
	if echo.StdinFrom != nil || cat.StdoutTo != nil {
		t.Errorf("echo stdin_from = %s, cat stdout_to = %s, want none: not pipes of the pipeline", peerString(echo.StdinFrom), peerString(cat.StdoutTo))
	}
}

// TestLineagePipelineThreeStages: echo | tr | cat, each pipe named by its
// later end.
func TestLineagePipelineThreeStages(t *testing.T) {
	requireKernel(t)
	execs, _ := runInSession(t, "sess-lineage-three", nil, "-c", "/bin/echo hi | /usr/bin/tr a-z A-Z | /bin/cat >/dev/null")
	echo := execNamed(t, execs, "/bin/echo", "hi")
	tr := execNamed(t, execs, "/usr/bin/tr", "a-z", "A-Z")
	cat := execNamed(t, execs, "/bin/cat")
	t.Run("echo to tr", func(t *testing.T) { checkPiped(t, execs, echo, tr) })
	t.Run("tr to cat", func(t *testing.T) { checkPiped(t, execs, tr, cat) })
}

// TestLineageAncestors: sh -> sh -> true; true's ancestors are the inner
// sh, then the outer one, with their comms and exes; the outer sh has none
// (its parent, the test, is not in the session).
func TestLineageAncestors(t *testing.T) {
	requireKernel(t)
	execs, shPid := runInSession(t, "sess-lineage-anc", nil, "-c", `/bin/sh -c "/bin/true; exit 0"; exit 0`)
	outer := execNamed(t, execs, "/bin/sh", "-c", `/bin/sh -c "/bin/true; exit 0"; exit 0`)
	inner := execNamed(t, execs, "/bin/sh", "-c", "/bin/true; exit 0")
	tr := execNamed(t, execs, "/bin/true")
	if outer.Pid != shPid || len(outer.Ancestors) != 0 {
		t.Errorf("outer sh: pid %d ancestors %q, want %d and none", outer.Pid, ancestorsOf(outer.Ancestors), shPid)
	}
	dash := outer.ExePath
	if !strings.HasPrefix(dash, "/") {
		t.Fatalf("outer sh exe_path = %q, want a path", dash)
	}
	want := []string{fmt.Sprintf("%d:sh:%s", inner.Pid, dash), fmt.Sprintf("%d:sh:%s", shPid, dash)}
	if got := ancestorsOf(tr.Ancestors); !slices.Equal(got, want) {
		t.Errorf("true's ancestors = %q, want %q", got, want)
	}
	if got := ancestorsOf(inner.Ancestors); !slices.Equal(got, want[1:]) {
		t.Errorf("inner sh's ancestors = %q, want %q", got, want[1:])
	}
}

// TestLineageInteractiveCurlPipeSh: a shell reads `curl -s URL | sh` on its
// stdin, a pipe from the test, so that no argv holds the pipeline. The
// script curl fetches runs /bin/echo, whose stdin is curl's pipe: its exec
// names curl, and its ancestors the inner sh and the shell. The inner sh
// and curl are named one by the other, whichever exec'd second.
func TestLineageInteractiveCurlPipeSh(t *testing.T) {
	requireKernel(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("skipping: curl is not installed (scripts/deps.sh installs it)")
	}
	// Beneath /tmp itself: nobody cannot reach a t.TempDir.
	dir, err := os.MkdirTemp("", "sandtrail-lineage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(dir, "pwned")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "/bin/echo pwned > %s\n", pwned)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/s.sh"
	execs, shPid := runInSession(t, "sess-lineage-curl", func(w *os.File) {
		fmt.Fprintf(w, "curl -s %s | sh\n", url)
	}, "-i")
	if b, err := os.ReadFile(pwned); err != nil || string(b) != "pwned\n" {
		t.Fatalf("the script did not run: %q, %v", b, err)
	}
	for _, ev := range execs {
		if slices.ContainsFunc(ev.Proc.Argv, func(a string) bool { return strings.Contains(a, "|") }) {
			t.Errorf("exec %q holds the pipeline in its argv", ev.Proc.Argv)
		}
	}
	c := execNamed(t, execs, "curl", "-s", url)
	inner := execNamed(t, execs, "sh")
	echo := execNamed(t, execs, "/bin/echo", "pwned")
	if c.ExePath != curl && !strings.HasSuffix(c.ExePath, "/curl") {
		t.Errorf("curl exe_path = %q, want %s", c.ExePath, curl)
	}
	checkPiped(t, execs, c, inner)
	if echo.StdinFrom == nil || echo.StdinFrom.Comm != "curl" || echo.StdinFrom.Pid != c.Pid {
		t.Errorf("/bin/echo stdin_from = %s, want curl (pid %d)", peerString(echo.StdinFrom), c.Pid)
	}
	anc := ancestorsOf(echo.Ancestors)
	if len(anc) != 2 || !strings.HasPrefix(anc[0], fmt.Sprintf("%d:sh:", inner.Pid)) || !strings.HasPrefix(anc[1], fmt.Sprintf("%d:sh:", shPid)) {
		t.Errorf("/bin/echo ancestors = %q, want the inner sh %d, then the shell %d", anc, inner.Pid, shPid)
	}
	if len(c.Ancestors) != 1 || c.Ancestors[0].Pid != shPid {
		t.Errorf("curl ancestors = %q, want the shell %d", ancestorsOf(c.Ancestors), shPid)
	}
}

// TestToEventLineage: the decoder feeds the table from the fork, exec and
// exit records, with the start times that tell processes apart.
func TestToEventLineage(t *testing.T) {
	d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }, lineage: newLineage()}
	// sh (98) forks 99, which forks the 100 that execs echo.
	for _, raw := range [][]byte{
		fixedRecord(processForkEvent{Hdr: header(processEventKindKIND_FORK, 98, "sh"), ChildPid: 99, ChildStartTime: 5}),
		fixedRecord(processForkEvent{Hdr: header(processEventKindKIND_FORK, 99, "sh"), ChildPid: 100, ChildStartTime: 999_000_000}),
	} {
		if _, _, err := d.toEvent(raw); err != nil {
			t.Fatal(err)
		}
	}
	ev, _, err := d.toEvent(seeds()["exec"])
	if err != nil {
		t.Fatal(err)
	}
	if got := ancestorsOf(ev.Proc.Ancestors); !slices.Equal(got, []string{"99:sh:"}) {
		t.Errorf("echo's ancestors = %q, want [99:sh:]", got)
	}
	// Its exit (start 999_000_000) takes it out of the table; 99 stays.
	exit := fixedRecord(processExitEvent{Hdr: header(processEventKindKIND_EXIT, 100, "echo"), Ppid: 99, StartTime: 999_000_000})
	if _, _, err := d.toEvent(exit); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.lineage.procs[100]; ok || d.lineage.procs[99] == nil {
		t.Errorf("after echo's exit the table holds %v, want 99 only", d.lineage.procs)
	}
	checkLineage(t, d.lineage)
}

// BenchmarkToEventForkExecExit decodes the fork, exec and exit records of
// one process, with the lineage table and without it: what the table adds
// to the decoding of a process.
func BenchmarkToEventForkExecExit(b *testing.B) {
	exec := execRecord("/usr/bin/cc", []string{"src", "home"}, "cc\x00-O2\x00-c\x00x.c\x00-o\x00x.o\x00", 0)
	binary.NativeEndian.PutUint64(exec[unsafe.Offsetof(processExecEvent{}.StdinPipe):], 9)
	for _, c := range []struct {
		name string
		l    *lineage
	}{{"lineage", newLineage()}, {"none", nil}} {
		b.Run(c.name, func(b *testing.B) {
			d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }, lineage: c.l}
			fork := fixedRecord(processForkEvent{Hdr: header(processEventKindKIND_FORK, 99, "make")})
			exit := fixedRecord(processExitEvent{Hdr: header(processEventKindKIND_EXIT, 100, "cc"), Ppid: 99})
			b.ReportAllocs()
			for i := uint32(0); b.Loop(); i++ {
				pid, start := 1000+i%30000, uint64(10+i)
				binary.NativeEndian.PutUint32(fork[unsafe.Offsetof(processForkEvent{}.ChildPid):], pid)
				binary.NativeEndian.PutUint64(fork[unsafe.Offsetof(processForkEvent{}.ChildStartTime):], start)
				binary.NativeEndian.PutUint32(exec[unsafe.Offsetof(processExecEvent{}.Hdr.Pid):], pid)
				binary.NativeEndian.PutUint64(exec[unsafe.Offsetof(processExecEvent{}.StartTime):], start)
				binary.NativeEndian.PutUint32(exit[unsafe.Offsetof(processExitEvent{}.Hdr.Pid):], pid)
				binary.NativeEndian.PutUint64(exit[unsafe.Offsetof(processExitEvent{}.StartTime):], start)
				for _, raw := range [][]byte{fork, exec, exit} {
					if _, _, err := d.toEvent(raw); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestLineageWorstCaseEncodes: an exec with every part the kernel sends at
// its largest, each byte one that JSON escapes as six, and the largest
// lineage the table gives, still encodes within event.MaxEncodedSize.
func TestLineageWorstCaseEncodes(t *testing.T) {
	esc := func(n processLimits) string { return strings.Repeat("\xff", int(n)) } // \ufffd
	l := newLineage()
	for pid := int32(1); pid <= event.MaxAncestors+1; pid++ {
		l.fork(pid, pid-1, strings.Repeat("<", 15), uint64(pid))
		l.exec(&event.Proc{Pid: pid, PPid: pid - 1, Comm: strings.Repeat("<", 15), ExePath: esc(processLimitsFILENAME_MAX_LEN),
			Argv: slices.Repeat([]string{esc(processLimitsARGV_MAX / 8)}, 8), StdinPipe: uint64(pid), StdoutPipe: uint64(pid + 1)}, uint64(pid))
	}
	p := &event.Proc{Pid: 100, PPid: event.MaxAncestors + 1, Comm: strings.Repeat("<", 15),
		Exe: esc(processLimitsFILENAME_MAX_LEN), ExePath: esc(processLimitsFILENAME_MAX_LEN), Cwd: esc(processLimitsCWD_MAX),
		Argv: []string{esc(processLimitsARGV_MAX)}, ArgvRaw: []byte(esc(processLimitsARGV_MAX)), ArgvTruncated: true,
		ArgvTail: []string{esc(processLimitsARGV_TAIL)}, ArgvTailRaw: []byte(esc(processLimitsARGV_TAIL)),
		Env: []string{esc(processLimitsENV_MAX)}, StdinPipe: 3, StdoutPipe: 2}
	l.exec(p, 200)
	if len(p.Ancestors) != event.MaxAncestors || p.StdinFrom == nil || p.StdoutTo == nil {
		t.Fatalf("lineage = %d ancestors, stdin_from %v, stdout_to %v, want the most", len(p.Ancestors), p.StdinFrom != nil, p.StdoutTo != nil)
	}
	ev := &event.Event{V: event.SchemaVersion, TS: time.Now(), Kind: event.KindExec, Source: event.SourceKernel, Proc: p}
	b, err := event.Marshal(ev)
	if err != nil {
		t.Fatalf("Marshal() = %v", err)
	}
	t.Logf("the largest exec encodes in %d bytes of %d", len(b), event.MaxEncodedSize)
}
