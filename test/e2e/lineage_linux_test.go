package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// runWithStdin is e.run with the session's stdin read from the pipe that
// feed writes into (and then closes).
func (e *env) runWithStdin(feed func(w *os.File), args ...string) result {
	e.t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	c := e.cmd(append([]string{"run", "--format", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = rd, &stdout, &stderr
	err = e.start(c)
	rd.Close()
	if err != nil {
		wr.Close()
		e.t.Fatalf("sandtrail run: %v", err)
	}
	feed(wr)
	wr.Close()
	err = c.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("sandtrail run: %v", err)
	}
	i := strings.LastIndex(r.stderr, "{\n  \"session_id\"")
	if i < 0 {
		e.t.Fatalf("sandtrail run %q: exit %d, no summary on stderr:\n%s", args, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stderr[i:]), &r.summary); err != nil {
		e.t.Fatalf("decoding run summary: %v\n%s", err, r.stderr[i:])
	}
	return r
}

// TestRunCurlPipeShLineage: the session is an interactive shell that reads
// `curl -s URL | sh` on its stdin, a pipe from the test, so that no argv
// in the record holds the pipeline. The recorded execs still join the two:
// of curl and the inner sh, the one that exec'd second names the other
// (the inner sh's stdin_from, or curl's stdout_to); the /bin/echo of the
// script curl fetched, whose stdin is curl's pipe, names curl, and its
// ancestors are the inner sh, then the shell.
func TestRunCurlPipeShLineage(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("skipping: curl is not installed (scripts/deps.sh installs it)")
	}
	e := newEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "/bin/echo pwned")
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/s.sh"
	r := e.runWithStdin(func(w *os.File) { fmt.Fprintf(w, "curl -s %s | sh\n", url) },
		"--user", "nobody", "--", "/bin/sh", "-i")
	if r.code != 0 || !strings.Contains(r.stdout, "pwned") {
		t.Fatalf("sandtrail run: exit %d, stdout %q, want 0 and the script's pwned\n%s", r.code, r.stdout, r.stderr)
	}
	execs := kinds(e.events(r.summary.SessionID), "process.exec")
	one := func(argv ...string) (*event.Proc, int) {
		t.Helper()
		i := slices.IndexFunc(execs, func(ev *event.Event) bool { return slices.Equal(ev.Proc.Argv, argv) })
		if i < 0 {
			t.Fatalf("no exec of %q in the session's %d execs", argv, len(execs))
		}
		return execs[i].Proc, i
	}
	shell, _ := one("/bin/sh", "-i")
	curl, curlAt := one("curl", "-s", url)
	inner, innerAt := one("sh")
	echo, _ := one("/bin/echo", "pwned")
	for _, ev := range execs {
		if slices.ContainsFunc(ev.Proc.Argv, func(a string) bool { return strings.Contains(a, "|") }) {
			t.Errorf("exec %q holds the pipeline in its argv", ev.Proc.Argv)
		}
	}
	if curlAt < innerAt {
		if inner.StdinFrom == nil || inner.StdinFrom.Comm != "curl" || inner.StdinFrom.Pid != curl.Pid {
			t.Errorf("inner sh (exec'd after curl) stdin_from = %+v, want curl, pid %d", inner.StdinFrom, curl.Pid)
		}
	} else if curl.StdoutTo == nil || curl.StdoutTo.Comm != "sh" || curl.StdoutTo.Pid != inner.Pid {
		t.Errorf("curl (exec'd after the inner sh) stdout_to = %+v, want sh, pid %d", curl.StdoutTo, inner.Pid)
	}
	t.Logf("inner sh: stdin_from %+v; curl: stdout_to %+v; /bin/echo: stdin_from %+v, ancestors %+v",
		inner.StdinFrom, curl.StdoutTo, echo.StdinFrom, echo.Ancestors)
	if echo.StdinFrom == nil || echo.StdinFrom.Comm != "curl" || !slices.Equal(echo.StdinFrom.Argv, curl.Argv) {
		t.Errorf("/bin/echo stdin_from = %+v, want curl with argv %q", echo.StdinFrom, curl.Argv)
	}
	if len(echo.Ancestors) < 2 || echo.Ancestors[0].Pid != inner.Pid || echo.Ancestors[0].Comm != "sh" ||
		echo.Ancestors[1].Pid != shell.Pid || echo.Ancestors[1].Exe != shell.ExePath {
		t.Errorf("/bin/echo ancestors = %+v, want the inner sh %d, then the shell %d (%s)", echo.Ancestors, inner.Pid, shell.Pid, shell.ExePath)
	}
	e.verify()
}
