package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// The facts of the executed file's identity and of the exec environment,
// each a process the execidentity helper starts.
const (
	// execArgvPadding arguments of 4 KiB each: 200 KiB before the command
	// (one argument may not exceed 128 KiB).
	execArgvPadding   = 50
	execHiddenCommand = "echo hidden-after-padding"
	execPreload       = "/nonexistent/sandtrail-e2e-preload.so"
	execProxy         = "http://user:s3cr3t-pw@127.0.0.1:3128"
	execProxyRecorded = "http_proxy=http://user:***@127.0.0.1:3128"
	execBadUTF8       = "a\xff\xfeb"
)

// execSelfHelper prints "LABEL PID EXE INO DEV", EXE being /proc/self/exe as
// the kernel names it, and stays alive long enough for the recorder to
// open its file.
func execSelfHelper(args []string) int {
	link, err := os.Readlink("/proc/self/exe")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Printf("%s %d %s %d %d\n", args[0], os.Getpid(), strings.ReplaceAll(link, " ", "\\x20"), st.Ino, st.Dev)
	time.Sleep(3 * time.Second)
	return 0
}

// execFdHelper PATH LABEL [unlink] opens PATH, unlinks it when asked, and
// becomes execself LABEL through execveat(fd, "", AT_EMPTY_PATH).
func execFdHelper(args []string) int {
	fd, err := unix.Open(args[0], unix.O_RDONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if len(args) > 2 && args[2] == "unlink" {
		if err := os.Remove(args[0]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	argv, _ := syscall.SlicePtrFromStrings([]string{args[1], args[1]})
	envv, _ := syscall.SlicePtrFromStrings([]string{helperEnv + "=execself"})
	empty, _ := syscall.BytePtrFromString("")
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
	fmt.Fprintln(os.Stderr, "execveat:", errno)
	return 3
}

// execIdentityHelper HELPER runs, inside the session: a copy of HELPER from a
// memfd (execve of /proc/self/fd/3); HELPER through execveat of a
// descriptor; HELPER through a symlink; a copy of HELPER unlinked before
// its execveat; /bin/true with bytes that are not UTF-8; /bin/true with
// 200 KiB of padding before a command; and /bin/true with LD_PRELOAD, a
// proxy holding a password and a variable the policy does not name.
func execIdentityHelper(args []string) int {
	self := args[0]
	selfEnv := []string{helperEnv + "=execself"}
	var cmds []*exec.Cmd
	start := func(c *exec.Cmd) bool {
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		cmds = append(cmds, c)
		return true
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	mfd, err := unix.MemfdCreate("sandtrail-e2e-memfd", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if _, err := unix.Write(mfd, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	memfd := &exec.Cmd{Path: "/proc/self/fd/3", Args: []string{"memfd", "memfd"}, Env: selfEnv,
		ExtraFiles: []*os.File{os.NewFile(uintptr(mfd), "memfd")}}
	if err := os.Symlink(self, "link-to-helper"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := os.WriteFile("gone", bin, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	wd, _ := os.Getwd()
	padded := []string{"/bin/true"}
	for range execArgvPadding {
		padded = append(padded, strings.Repeat("p", 4096))
	}
	padded = append(padded, "-c", execHiddenCommand)
	env := &exec.Cmd{Path: "/bin/true", Args: []string{"/bin/true", "with-env"},
		Env: []string{"LD_PRELOAD=" + execPreload, "http_proxy=" + execProxy, "E2E_UNLISTED=x"}}
	ok := start(memfd) &&
		start(&exec.Cmd{Path: self, Args: []string{self, self, "fexec"}, Env: []string{helperEnv + "=execfd"}}) &&
		start(&exec.Cmd{Path: filepath.Join(wd, "link-to-helper"), Args: []string{"link", "link"}, Env: selfEnv}) &&
		start(&exec.Cmd{Path: self, Args: []string{self, filepath.Join(wd, "gone"), "deleted", "unlink"}, Env: []string{helperEnv + "=execfd"}}) &&
		start(&exec.Cmd{Path: "/bin/true", Args: []string{"/bin/true", execBadUTF8, "ok"}}) &&
		start(&exec.Cmd{Path: "/bin/true", Args: padded}) &&
		start(env)
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, c.Args, err)
			ok = false
		}
	}
	if !ok {
		return 3
	}
	return 0
}

// execChild is what an execself child printed.
type execChild struct {
	pid      int32
	exe      string
	ino, dev uint64
}

// TestRunExecIdentity: the executed file's identity and its environment, as
// the unprivileged agent in a real session. The record names the file the
// kernel executed (a memfd as the kernel does, a descriptor's and a
// symlink's binary), with its device, inode and sha256, fileless for a
// memfd and an unlinked file; non-UTF-8 argv bytes exactly; the size,
// count and last 4 KiB of a 200 KiB argv, where the command after the
// padding is; and the policy's environment variables, redacted.
func TestRunExecIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run(append([]string{"--user", "nobody", "--"}, helperCmd("execidentity", helper)...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	children := map[string]execChild{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		ino, _ := strconv.ParseUint(f[3], 10, 64)
		dev, _ := strconv.ParseUint(f[4], 10, 64)
		children[f[0]] = execChild{pid: int32(pid), exe: strings.ReplaceAll(f[2], "\\x20", " "), ino: ino, dev: dev}
	}
	bin, err := os.ReadFile(helper)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	helperSum := hex.EncodeToString(sum[:])
	realHelper, err := filepath.EvalSymlinks(helper)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(realHelper, &st); err != nil {
		t.Fatal(err)
	}

	execs := kinds(e.events(r.summary.SessionID), event.KindExec)
	for _, c := range []struct {
		label, exe string
		fileless   bool
		same       bool // the helper file itself: its inode and device
	}{
		{label: "memfd", exe: "/proc/self/fd/3", fileless: true},
		{label: "fexec", exe: "/dev/fd/", same: true},
		{label: "link", exe: "/link-to-helper", same: true},
		{label: "deleted", exe: "/dev/fd/", fileless: true},
	} {
		t.Run(c.label, func(t *testing.T) {
			ch, ok := children[c.label]
			if !ok {
				t.Fatalf("the %s child printed nothing:\n%s", c.label, r.stdout)
			}
			p := execOf(execs, ch.pid, c.label)
			if p == nil {
				t.Fatalf("no process.exec of pid %d with argv[0] %q", ch.pid, c.label)
			}
			// The session's stat of a file beneath its /tmp (an overlay)
			// shows the overlay's device for the layer; the record names
			// the real file, as the host sees it (the check after this).
			if p.ExePath != ch.exe || p.ExeIno != ch.ino || !c.same && p.ExeDev != ch.dev {
				t.Errorf("exe_path, exe_ino, exe_dev = %q, %d, %d, want the kernel's %q, %d, %d", p.ExePath, p.ExeIno, p.ExeDev, ch.exe, ch.ino, ch.dev)
			}
			if c.same && (p.ExePath != realHelper || p.ExeIno != st.Ino || p.ExeDev != st.Dev) {
				t.Errorf("exe_path, exe_ino, exe_dev = %q, %d, %d, want the helper's %q, %d, %d", p.ExePath, p.ExeIno, p.ExeDev, realHelper, st.Ino, st.Dev)
			}
			if p.Fileless != c.fileless {
				t.Errorf("fileless = %v, want %v", p.Fileless, c.fileless)
			}
			if p.ExeSHA256 != helperSum {
				t.Errorf("exe_sha256 = %q (missing: %q), want %s", p.ExeSHA256, p.ExeSHA256Missing, helperSum)
			}
			if !strings.Contains(p.Exe, c.exe) {
				t.Errorf("exe = %q, want the name the caller passed, %q", p.Exe, c.exe)
			}
		})
	}
	if p := children["memfd"]; p.exe != "/memfd:sandtrail-e2e-memfd (deleted)" {
		t.Errorf("the memfd child's /proc/self/exe = %q, want /memfd:sandtrail-e2e-memfd (deleted)", p.exe)
	}

	t.Run("argv not UTF-8", func(t *testing.T) {
		p := execWithArg(execs, 2, "ok")
		if p == nil {
			t.Fatal("no process.exec of /bin/true with the non-UTF-8 argument")
		}
		if want := "/bin/true\x00" + execBadUTF8 + "\x00ok\x00"; string(p.ArgvRaw) != want {
			t.Errorf("argv_raw = %q, want %q", p.ArgvRaw, want)
		}
	})
	t.Run("argv tail", func(t *testing.T) {
		var p *event.Proc
		for _, ev := range execs {
			if a := ev.Proc.Argv; len(a) > 0 && a[0] == "/bin/true" && ev.Proc.ArgvTruncated {
				p = ev.Proc
			}
		}
		if p == nil {
			t.Fatal("no process.exec of the padded /bin/true")
		}
		size := uint64(len("/bin/true") + 1 + execArgvPadding*4097 + len("-c") + 1 + len(execHiddenCommand) + 1)
		argc := uint32(execArgvPadding + 3)
		if !p.ArgvTruncated || p.ArgvSize != size || p.Argc == nil || *p.Argc != argc {
			t.Errorf("argv_truncated, argv_size, argc = %v, %d, %v, want true, %d, %d", p.ArgvTruncated, p.ArgvSize, p.Argc, size, argc)
		}
		n := len(p.ArgvTail)
		if n < 3 || p.ArgvTail[n-2] != "-c" || p.ArgvTail[n-1] != execHiddenCommand || strings.Trim(strings.Join(p.ArgvTail[:n-2], ""), "p") != "" {
			t.Errorf("argv_tail ends %q, want padding, -c, %q", p.ArgvTail[max(0, n-2):], execHiddenCommand)
		}
		if got := len(strings.Join(p.ArgvTail, "\x00")) + 1; got != 4096 {
			t.Errorf("argv_tail holds %d bytes, want 4096", got)
		}
	})
	t.Run("env", func(t *testing.T) {
		p := execWithArg(execs, 1, "with-env")
		if p == nil {
			t.Fatal("no process.exec of /bin/true with-env")
		}
		want := []string{"LD_PRELOAD=" + execPreload, execProxyRecorded}
		if strings.Join(p.Env, "\n") != strings.Join(want, "\n") {
			t.Errorf("env = %q, want %q (the proxy's password masked, E2E_UNLISTED left out)", p.Env, want)
		}
	})
	e.verify()
}

// execOf returns the exec of pid whose argv[0] is label.
func execOf(execs []*event.Event, pid int32, label string) *event.Proc {
	for _, ev := range execs {
		if ev.Proc.Pid == pid && len(ev.Proc.Argv) > 0 && ev.Proc.Argv[0] == label {
			return ev.Proc
		}
	}
	return nil
}

// execWithArg returns the exec of /bin/true whose last argument is arg,
// at index i.
func execWithArg(execs []*event.Event, i int, arg string) *event.Proc {
	for _, ev := range execs {
		a := ev.Proc.Argv
		if len(a) > i && a[0] == "/bin/true" && a[len(a)-1] == arg && len(a) == i+1 {
			return ev.Proc
		}
	}
	return nil
}
