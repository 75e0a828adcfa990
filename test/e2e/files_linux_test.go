package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// helperFiles is the agent of TestFiles: it prints its pid and home, reads
// /etc/passwd, writes ~/.aws/credentials, deletes a file, renames one and
// fails to open /etc/shadow.
func helperFiles([]string) int {
	home := os.Getenv("HOME")
	fmt.Printf("%d %s\n", os.Getpid(), home)
	step := func(what string, err error) bool {
		if err != nil {
			fmt.Fprintln(os.Stderr, what+":", err)
		}
		return err != nil
	}
	if _, err := os.ReadFile("/etc/passwd"); step("reading /etc/passwd", err) {
		return 1
	}
	aws := filepath.Join(home, ".aws")
	if step("creating ~/.aws", os.Mkdir(aws, 0o700)) ||
		step("creating credentials", os.WriteFile(filepath.Join(aws, "credentials"), nil, 0o600)) ||
		step("writing credentials", os.WriteFile(filepath.Join(aws, "credentials"), []byte("[default]\naws_access_key_id = AKIAEXAMPLE\n"), 0o600)) ||
		step("creating doomed", os.WriteFile("doomed.txt", []byte("x"), 0o644)) ||
		step("deleting doomed", os.Remove("doomed.txt")) ||
		step("creating old", os.WriteFile("old.txt", []byte("x"), 0o644)) ||
		step("renaming", os.Rename("old.txt", "new.txt")) {
		return 1
	}
	if _, err := os.Open("/etc/shadow"); !errors.Is(err, os.ErrPermission) {
		fmt.Fprintln(os.Stderr, "opening /etc/shadow:", err, "want EACCES")
		return 1
	}
	return 0
}

// TestFiles: in a session the agent reads
// /etc/passwd, writes ~/.aws/credentials, deletes a file, renames one and
// fails to open /etc/shadow; each is recorded with op, absolute path, pid,
// uid and result (EACCES for the last).
func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uid := nobodyUID(t)
	// The embedded default policy decides what is recorded.
	r := e.run(append([]string{"--user", "nobody", "--"}, helperCmd("files")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\n%s", r.code, r.stderr)
	}
	pidS, home, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
	pid, err := strconv.Atoi(pidS)
	if err != nil || !filepath.IsAbs(home) {
		t.Fatalf("helper output %q: want its pid and home", r.stdout)
	}
	evs := e.events(r.summary.SessionID)
	for _, c := range []struct {
		kind, path, newPath, errno string
	}{
		{kind: "file.read", path: "/etc/passwd"},
		{kind: "file.create", path: filepath.Join(home, ".aws", "credentials")},
		{kind: "file.write", path: filepath.Join(home, ".aws", "credentials")},
		{kind: "file.delete", path: filepath.Join(home, "doomed.txt")},
		{kind: "file.rename", path: filepath.Join(home, "old.txt"), newPath: filepath.Join(home, "new.txt")},
		{kind: "file.read", path: "/etc/shadow", errno: "EACCES"},
	} {
		var ev *event.Event
		for _, x := range kinds(evs, c.kind) {
			if x.File.Path == c.path && x.Proc != nil && x.Proc.Pid == int32(pid) {
				ev = x
				break
			}
		}
		if ev == nil {
			t.Errorf("no %s of %s by pid %d in session %s", c.kind, c.path, pid, r.summary.SessionID)
			continue
		}
		f := ev.File
		if f.Op != strings.TrimPrefix(c.kind, "file.") || f.NewPath != c.newPath || f.Errno != c.errno {
			t.Errorf("%s %s = op %q new_path %q errno %q, want %q %q %q", c.kind, c.path, f.Op, f.NewPath, f.Errno, strings.TrimPrefix(c.kind, "file."), c.newPath, c.errno)
		}
		if c.errno == "" && (f.Result == nil || *f.Result < 0) {
			t.Errorf("%s %s result = %v, want a success", c.kind, c.path, f.Result)
		}
		if c.errno != "" && f.Result != nil {
			t.Errorf("%s %s result = %d, want none with errno %s", c.kind, c.path, *f.Result, c.errno)
		}
		if ev.Proc.UID == nil || *ev.Proc.UID != uid || ev.Source != event.SourceKernel {
			t.Errorf("%s %s uid %v source %s, want %d kernel", c.kind, c.path, ev.Proc.UID, ev.Source, uid)
		}
	}
	if r.summary.Lost != 0 {
		t.Errorf("run summary lost = %d, want 0", r.summary.Lost)
	}
	e.verify()
}
