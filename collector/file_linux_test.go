//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

func init() {
	helperModes["file-ops"] = helperFileOps
	helperModes["file-mount"] = helperFileMount
	helperModes["file-block-many"] = helperFileBlockMany
}

// helperFileBlockMany opens the FIFO args[0] for reading from args[1]
// threads at once; each open blocks until a writer opens it.
func helperFileBlockMany(args []string) int {
	n, _ := strconv.Atoi(args[1])
	errs := make(chan error, n)
	for range n {
		go func() {
			runtime.LockOSThread()
			fd, err := unix.Open(args[0], unix.O_RDONLY, 0)
			if err == nil {
				unix.Close(fd)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 1
		}
	}
	return 0
}

// helperFileMount mounts a tmpfs on args[0] and unmounts it.
func helperFileMount(args []string) int {
	if err := unix.Mount("sandtrail-src", args[0], "tmpfs", unix.MS_NOSUID, "size=1m"); err != nil {
		fmt.Fprintln(os.Stderr, "mount:", err)
		return 1
	}
	if err := unix.Unmount(args[0], unix.MNT_DETACH); err != nil {
		fmt.Fprintln(os.Stderr, "umount:", err)
		return 1
	}
	return 0
}

// helperFileOps does the file operations TestFileOps checks, in the
// directories args[0] (home) and args[1] (work). It runs as an unprivileged
// user.
func helperFileOps(args []string) int {
	home, work := args[0], args[1]
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1
	}
	if _, err := os.ReadFile("/etc/passwd"); err != nil {
		return fail("reading /etc/passwd", err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("[default]\n"), 0o600); err != nil {
		return fail("writing credentials", err)
	}
	// A failed sensitive read, absolute and relative to a dirfd.
	if _, err := os.Open("/etc/shadow"); !errors.Is(err, os.ErrPermission) {
		return fail("opening /etc/shadow", fmt.Errorf("got %v, want EACCES", err))
	}
	etc, err := unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fail("opening /etc", err)
	}
	if _, err := unix.Openat(etc, "shadow", unix.O_RDONLY|unix.O_NOFOLLOW, 0); err != unix.EACCES {
		return fail("openat(/etc, shadow)", fmt.Errorf("got %v, want EACCES", err))
	}
	// Not sensitive: must not be recorded.
	if _, err := os.ReadFile(filepath.Join(work, "plain.txt")); err != nil {
		return fail("reading plain.txt", err)
	}
	// Pseudo files and character devices: must not be recorded.
	if err := os.WriteFile("/dev/null", []byte("x"), 0); err != nil {
		return fail("writing /dev/null", err)
	}
	if err := os.WriteFile("/proc/self/comm", []byte("renamed"), 0); err != nil {
		return fail("writing /proc/self/comm", err)
	}
	if err := os.Remove(filepath.Join(work, "del.txt")); err != nil {
		return fail("deleting", err)
	}
	if err := os.Rename(filepath.Join(work, "a.txt"), filepath.Join(work, "b.txt")); err != nil {
		return fail("renaming", err)
	}
	// Relative to the cwd: an unlink (named by the caller) and an open
	// (named by the kernel).
	if err := os.Chdir(work); err != nil {
		return fail("chdir", err)
	}
	if err := unix.Unlink("rel-del.txt"); err != nil {
		return fail("unlinking rel-del.txt", err)
	}
	fd, err := unix.Open("rel-new.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		return fail("creating rel-new.txt", err)
	}
	unix.Close(fd)
	// Relative to a dirfd.
	dir, err := unix.Open(work, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fail("opening work", err)
	}
	fd, err = unix.Openat(dir, "dirfd.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	if err != nil {
		return fail("creating dirfd.txt", err)
	}
	unix.Close(fd)
	if err := unix.Renameat(dir, "dirfd.txt", dir, "dirfd2.txt"); err != nil {
		return fail("renameat", err)
	}
	if err := os.Truncate(filepath.Join(work, "t.txt"), 1); err != nil {
		return fail("truncating", err)
	}
	if err := os.Chmod(filepath.Join(work, "c.txt"), 0o600); err != nil {
		return fail("chmod", err)
	}
	for range 100 {
		fd, err := unix.Open(filepath.Join(work, "loop.txt"), unix.O_WRONLY|unix.O_APPEND, 0)
		if err != nil {
			return fail("opening loop.txt", err)
		}
		unix.Close(fd)
	}
	return 0
}

// TestFileOps runs file operations as an unprivileged user in a watched
// cgroup and checks each event's op, absolute path, pid, uid and result, and
// that non-sensitive reads and writes to pseudo files are not recorded.
func TestFileOps(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	// A private copy of the test binary, which the other user can run,
	// and its home and work directories.
	root := t.TempDir()
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{home, filepath.Join(home, ".aws"), work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"plain.txt", "del.txt", "a.txt", "rel-del.txt", "t.txt", "c.txt", "loop.txt"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, nobody, nobody) })
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "helper")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}

	r := startRecorder(t, false, WithSensitiveReads([]string{"/etc"}, []string{"/etc/ld.so.cache", "/etc/nsswitch.conf"}))
	const sid = "sess-files"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	if err := r.c.AddSensitive(cg.ID, []string{filepath.Join(home, ".aws"), filepath.Join(home, ".ssh")}, nil); err != nil {
		t.Fatalf("AddSensitive() = %v", err)
	}
	if err := r.c.AddSensitive(cg.ID, []string{"relative/path"}, nil); err == nil {
		t.Errorf("AddSensitive(relative) = nil, want an error")
	}
	cmd := exec.Command(bin, home, work)
	cmd.Env = append(os.Environ(), helperEnv+"=file-ops")
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	pid := int32(cmd.Process.Pid)
	// Past the merge window, so that the merged opens are sent before
	// Close (Close sends them too; this checks the periodic flush).
	time.Sleep(DefaultMergeWindow + 500*time.Millisecond)
	evs := r.stop(t)

	var mine []*event.Event
	for _, ev := range evs {
		if ev.SessionID == sid && ev.File != nil && ev.Proc.Pid == pid {
			mine = append(mine, ev)
		}
	}
	for _, ev := range mine {
		t.Logf("%s %s %q new=%q flags=%#o result=%v errno=%s count=%d", ev.Kind, ev.Proc.Comm, ev.File.Path, ev.File.NewPath, ev.File.Flags, deref64(ev.File.Result), ev.File.Errno, ev.File.Count)
		if ev.Proc.UID == nil || *ev.Proc.UID != nobody || ev.Proc.CgroupID != cg.ID || ev.File.Op != strings.TrimPrefix(ev.Kind, "file.") {
			t.Errorf("%s %s: uid %v cgroup %d op %q, want %d %d and the kind's op", ev.Kind, ev.File.Path, deref(ev.Proc.UID), ev.Proc.CgroupID, ev.File.Op, nobody, cg.ID)
		}
		if !strings.HasPrefix(ev.File.Path, "/") {
			t.Errorf("%s path %q is not absolute", ev.Kind, ev.File.Path)
		}
	}
	find := func(kind, path, errno string) *event.Event {
		for _, ev := range mine {
			if ev.Kind == kind && ev.File.Path == path && ev.File.Errno == errno {
				return ev
			}
		}
		return nil
	}
	for _, c := range []struct {
		kind, path, newPath, errno string
		flags                      uint32
	}{
		{kind: event.KindFileRead, path: "/etc/passwd"},
		{kind: event.KindFileWrite, path: filepath.Join(home, ".aws", "credentials")},
		{kind: event.KindFileRead, path: "/etc/shadow", errno: "EACCES", flags: unix.O_RDONLY | unix.O_CLOEXEC},
		{kind: event.KindFileDelete, path: filepath.Join(work, "del.txt")},
		{kind: event.KindFileRename, path: filepath.Join(work, "a.txt"), newPath: filepath.Join(work, "b.txt")},
		{kind: event.KindFileDelete, path: filepath.Join(work, "rel-del.txt")},
		{kind: event.KindFileCreate, path: filepath.Join(work, "rel-new.txt")},
		{kind: event.KindFileCreate, path: filepath.Join(work, "dirfd.txt")},
		{kind: event.KindFileRename, path: filepath.Join(work, "dirfd.txt"), newPath: filepath.Join(work, "dirfd2.txt")},
		{kind: event.KindFileTruncate, path: filepath.Join(work, "t.txt")},
		{kind: event.KindFileChmod, path: filepath.Join(work, "c.txt"), flags: 0o600},
	} {
		ev := find(c.kind, c.path, c.errno)
		if ev == nil {
			t.Errorf("no %s of %s (errno %q) by pid %d", c.kind, c.path, c.errno, pid)
			continue
		}
		if ev.File.NewPath != c.newPath {
			t.Errorf("%s %s: new_path %q, want %q", c.kind, c.path, ev.File.NewPath, c.newPath)
		}
		if c.flags != 0 && ev.File.Flags&0o7777777 != c.flags {
			t.Errorf("%s %s: flags %#o, want %#o", c.kind, c.path, ev.File.Flags, c.flags)
		}
		if c.errno == "" && (ev.File.Result == nil || *ev.File.Result < 0) {
			t.Errorf("%s %s: result %v, want a success", c.kind, c.path, deref64(ev.File.Result))
		}
	}
	// The openat relative to the /etc dirfd failed too: both are there.
	var shadows []uint32
	for _, ev := range mine {
		if ev.Kind == event.KindFileRead && ev.File.Path == "/etc/shadow" && ev.File.Errno == "EACCES" {
			shadows = append(shadows, ev.File.Flags)
		}
	}
	if len(shadows) != 2 {
		t.Errorf("failed reads of /etc/shadow = flags %#o, want two (absolute and via a dirfd)", shadows)
	}
	// Not recorded: a non-sensitive read, an exception, pseudo files.
	for _, ev := range mine {
		switch {
		case ev.File.Path == filepath.Join(work, "plain.txt"),
			ev.File.Path == "/dev/null",
			ev.File.Path == "/etc/ld.so.cache",
			strings.HasPrefix(ev.File.Path, "/proc/"):
			t.Errorf("recorded %s of %s, want it left out", ev.Kind, ev.File.Path)
		}
	}
	// The 100 identical opens: one event sent at once, the repeats merged.
	var loops []uint64
	var total uint64
	for _, ev := range mine {
		if ev.Kind == event.KindFileWrite && ev.File.Path == filepath.Join(work, "loop.txt") {
			loops = append(loops, ev.File.Count)
			total += max(ev.File.Count, 1)
		}
	}
	if total != 100 || len(loops) > 3 {
		t.Errorf("opens of loop.txt = events with counts %v (total %d), want a few summing to 100", loops, total)
	}
	if n := losses(evs)["file"]; n != 0 {
		t.Errorf("file losses = %d, want 0", n)
	}
}

// TestFileReadRulesLater checks the kernel's read decision against the
// directories as they are when the reads happen, not when the rules were
// set: a sensitive directory made after the rules (~/.aws), one deleted and
// made again (~/gone), an exception made after the rules inside a sensitive
// directory (~/keys/public), a sensitive file, and non-sensitive files
// beneath the directory that holds the rules.
func TestFileReadRulesLater(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	home := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("keys/old")
	mk("gone/old")
	mk("token")
	r := startRecorder(t, false)
	const sid = "sess-later"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	if err := r.c.AddSensitive(cg.ID, []string{filepath.Join(home, ".aws"), filepath.Join(home, "keys"), filepath.Join(home, "gone"), filepath.Join(home, "token")},
		[]string{filepath.Join(home, "keys", "public")}); err != nil {
		t.Fatalf("AddSensitive() = %v", err)
	}
	// After the rules: ~/.aws is made, ~/gone is made again.
	if err := os.RemoveAll(filepath.Join(home, "gone")); err != nil {
		t.Fatal(err)
	}
	want := []string{mk(".aws/credentials"), mk("keys/id"), mk("keys/sub/deep"), mk("gone/new"), mk("token")}
	unwanted := []string{mk("keys/public/id.pub"), mk("keysX"), mk("work/deep/er/plain.txt"), mk(".aws2/credentials")}
	checkReads(t, r, cg, want, unwanted)
}

// TestFileReadsDecidedAtOpen: reads beneath rules whose
// directories did not exist when they were added (~/.ssh, ~/.aws, the
// nested ~/.config/gcloud and ~/.docker/config.json, and an exception
// inside a missing ~/.ssh) are decided by the kernel at the open: they are
// recorded though the rules are gone (Unwatch) before the reader, held
// back until then, decodes them.
func TestFileReadsDecidedAtOpen(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	home := t.TempDir()
	gate := make(chan struct{})
	r := startRecorder(t, false, withReaderGate(gate))
	if err := r.c.Watch(cg.ID, "sess-open"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	in := func(rel string) string { return filepath.Join(home, rel) }
	if err := r.c.AddSensitive(cg.ID, []string{in(".ssh"), in(".aws"), in(".config/gcloud"), in(".docker/config.json")},
		[]string{in(".ssh/known_hosts")}); err != nil {
		t.Fatalf("AddSensitive() = %v", err)
	}
	files := []string{".ssh/id_rsa", ".ssh/known_hosts", ".aws/credentials", ".config/gcloud/adc.json", ".config/other",
		".docker/config.json", ".docker/other"}
	var paths []string
	for _, f := range files {
		p := in(f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command("/bin/cat", paths...)
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	if err := r.c.Unwatch(cg.ID); err != nil {
		t.Fatalf("Unwatch() = %v", err)
	}
	close(gate)
	got := map[string]bool{}
	for _, ev := range r.stop(t) {
		if ev.Kind == event.KindFileRead && ev.Proc.Pid == int32(cmd.Process.Pid) {
			got[ev.File.Path] = true
		}
	}
	for _, f := range files {
		want := !strings.Contains(f, "other") && f != ".ssh/known_hosts"
		if got[in(f)] != want {
			t.Errorf("file.read of %s recorded = %v, want %v", in(f), got[in(f)], want)
		}
	}
}

// checkReads has cat in cg read every file of want and unwanted, stops r,
// and checks that cat's file.read events name each of want and none of
// unwanted.
func checkReads(t *testing.T, r *recorder, cg *cgrouptest.Cgroup, want, unwanted []string) {
	t.Helper()
	cmd := exec.Command("/bin/cat", append(slices.Clone(want), unwanted...)...)
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	pid := int32(cmd.Process.Pid)
	got := map[string]bool{}
	for _, ev := range r.stop(t) {
		if ev.Kind == event.KindFileRead && ev.Proc.Pid == pid {
			got[ev.File.Path] = true
		}
	}
	for _, p := range want {
		if !got[p] {
			t.Errorf("no file.read of %s (a name of %d bytes); got %v", p, len(filepath.Base(p)), got)
		}
	}
	for _, p := range unwanted {
		if got[p] {
			t.Errorf("recorded file.read of %s, want it left out", p)
		}
	}
}

// TestFileNameBits checks the kernel's name filter (name_listed) against
// nameBit: sensitive names of every length class (1 to 7 bytes, whose
// first word is padded; exactly 8; longer; 39, the longest kept in the
// dentry; 40 and more, always looked up; and past the key's 55 bytes) are
// recorded when read, and a name that differs from one only after its
// eighth byte, or only in length, is not.
func TestFileNameBits(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	dir := t.TempDir()
	var sensitive, want []string
	for _, n := range []int{1, 3, 7, 8, 9, 16, 39, 40, 54, 60} {
		name := strings.Repeat("k", n-1) + "z"
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sensitive, want = append(sensitive, p), append(want, p)
	}
	var unwanted []string
	for _, name := range []string{"kkkkkkkkkkkkkkkx", "kkkkkkkzz", "kkx"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("plain\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		unwanted = append(unwanted, p)
	}
	r := startRecorder(t, false)
	const sid = "sess-name-bits"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	if err := r.c.AddSensitive(cg.ID, sensitive, nil); err != nil {
		t.Fatalf("AddSensitive() = %v", err)
	}
	checkReads(t, r, cg, want, unwanted)
}

// TestFileBlockedOpens blocks many opens at once, each in its own thread,
// releases them together and checks that every one is recorded, with no
// loss: the arguments are read from the task's registers at the syscall's
// exit, however long it blocked.
func TestFileBlockedOpens(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	const n = 20
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRecorder(t, false)
	const sid = "sess-blocked-opens"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	if err := r.c.AddSensitive(cg.ID, []string{dir}, nil); err != nil {
		t.Fatalf("AddSensitive() = %v", err)
	}
	cmd := helperCmd(t, cg, "file-block-many", fifo, strconv.Itoa(n))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until every thread of the helper is blocked in the FIFO's open.
	deadline := time.Now().Add(60 * time.Second)
	for blockedInOpen(cmd.Process.Pid) < n {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%d threads blocked in open after 60 s, want %d", blockedInOpen(cmd.Process.Pid), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A writer releases every reader.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	evs := r.stop(t)
	var got uint64
	for _, ev := range inSession(evs, sid, event.KindFileRead) {
		if ev.File.Path == fifo {
			got += max(ev.File.Count, 1)
		}
	}
	var lost uint64
	for _, ev := range evs {
		if ev.Kind == event.KindLoss {
			lost += ev.Loss.Count
		}
	}
	if got != n || lost != 0 {
		t.Errorf("reads of the FIFO = %d, losses = %d, want %d and 0", got, lost, n)
	}
}

// blockedInOpen counts the threads of pid whose current syscall is openat
// (unix.Open's), from /proc/<pid>/task/<tid>/syscall.
func blockedInOpen(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, e.Name()))
		if err != nil {
			continue
		}
		var nr int
		if _, err := fmt.Sscan(string(b), &nr); err == nil && nr == unix.SYS_OPENAT {
			n++
		}
	}
	return n
}

// TestFileMount checks file.mount for a mount and file.umount for an umount2
// by root.
func TestFileMount(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	dir := t.TempDir()
	r := startRecorder(t, false)
	if err := r.c.Watch(cg.ID, "sess-mount"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	cmd := helperCmd(t, cg, "file-mount", dir)
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	var got []string
	evs := r.stop(t)
	for _, kind := range []string{event.KindFileMount, event.KindFileUmount} {
		for _, ev := range inSession(evs, "sess-mount", kind) {
			f := ev.File
			got = append(got, fmt.Sprintf("%s %s %s %s %#x %s", kind, f.Path, f.Source, f.FSType, f.Flags, f.Errno))
		}
	}
	want := []string{
		fmt.Sprintf("file.mount %s sandtrail-src tmpfs %#x ", dir, unix.MS_NOSUID),
		fmt.Sprintf("file.umount %s   %#x ", dir, unix.MNT_DETACH),
	}
	if !slices.Equal(got, want) {
		t.Errorf("mount events = %q, want %q", got, want)
	}
}

// TestReadRules checks the Go side of the read rules: nearest ancestor
// wins, "/" and missing paths.
func TestReadRules(t *testing.T) {
	m := &readMatcher{}
	m.add("/etc", true)
	m.add("/etc/ssl", false)
	m.add("/etc/ssl/private", true)
	m.add("/home/a/.aws", true)
	m.sort()
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/etc", true},
		{"/etc/shadow", true},
		{"/etcetera", false},
		{"/etc/ssl/certs/x.pem", false},
		{"/etc/ssl/private/key", true},
		{"/home/a/.aws/credentials", true},
		{"/home/a/.awsx", false},
		{"/tmp/x", false},
	} {
		if got := m.sensitive(c.path); got != c.want {
			t.Errorf("sensitive(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	m.all = true
	if !m.sensitive("/tmp/x") || m.sensitive("/etc/ssl/x") {
		t.Errorf("with / sensitive: sensitive(/tmp/x), sensitive(/etc/ssl/x) = %v, %v, want true, false", m.sensitive("/tmp/x"), m.sensitive("/etc/ssl/x"))
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "d"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ino := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	const (
		sens  = uint32(fileFileVerdictFILE_SENSITIVE)
		exc   = uint32(fileFileVerdictFILE_EXCEPTION)
		maybe = uint32(fileFileVerdictFILE_MAYBE)
	)
	node := func(n uint32) uint32 { return n << fileFileVerdictFILE_NODE_SHIFT }
	deep := []string{dir, "x"}
	for _, c := range "abcdefghi" {
		deep = append(deep, string(c))
	}
	deepKeys := map[fileFileKey]uint32{fileKey(ino(dir), "x"): exc | node(1)}
	for i, name := range deep[2:10] { // i is past the last key
		v := exc | node(uint32(i)+2)
		if i == 7 {
			v = maybe // the trie's depth: Go decides beneath it
		}
		deepKeys[fileKey(fileNodeIno|uint64(i)+1, name)] = v
	}
	for _, c := range []struct {
		name       string
		sensitive  []string
		exceptions []string
		want       map[fileFileKey]uint32
	}{
		{name: "existing", sensitive: []string{filepath.Join(dir, "d")},
			want: map[fileFileKey]uint32{fileKey(ino(dir), "d"): sens}},
		{name: "link", sensitive: []string{filepath.Join(dir, "link")},
			want: map[fileFileKey]uint32{fileKey(ino(dir), "d"): sens}},
		{name: "missing", sensitive: []string{filepath.Join(dir, "x")},
			want: map[fileFileKey]uint32{fileKey(ino(dir), "x"): sens}},
		{name: "missing below missing", sensitive: []string{filepath.Join(dir, "x", "y", "z")},
			want: map[fileFileKey]uint32{
				fileKey(ino(dir), "x"): exc | node(1), fileKey(fileNodeIno|1, "y"): exc | node(2),
				fileKey(fileNodeIno|2, "z"): sens}},
		{name: "missing below a link", sensitive: []string{filepath.Join(dir, "link", "y")},
			want: map[fileFileKey]uint32{fileKey(ino(filepath.Join(dir, "d")), "y"): sens}},
		{name: "missing exception in missing", sensitive: []string{filepath.Join(dir, "x")}, exceptions: []string{filepath.Join(dir, "x", "k")},
			want: map[fileFileKey]uint32{fileKey(ino(dir), "x"): sens | node(1), fileKey(fileNodeIno|1, "k"): exc}},
		{name: "deeper than the trie", sensitive: []string{filepath.Join(deep...)}, want: deepKeys},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := compileRules(map[uint64]readRules{1: {c.sensitive, c.exceptions}}, &fileNodes{})
			if err != nil {
				t.Fatalf("compileRules(%q, %q) = %v", c.sensitive, c.exceptions, err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("compileRules(%q, %q) = %v, want %v", c.sensitive, c.exceptions, got, c.want)
			}
		})
	}
}

func TestJoinPath(t *testing.T) {
	for _, c := range []struct {
		name, user string
		base       []string // leaf first, as the kernel writes it
		haveBase   bool
		cut        bool
		want       string
	}{
		{name: "absolute", user: "/etc//passwd", want: "/etc/passwd"},
		{name: "absolute with dot-dot", user: "/etc/ssl/../shadow", want: "/etc/shadow"},
		{name: "relative to the cwd", user: "x/../y.txt", base: []string{"work", "tmp"}, haveBase: true, want: "/tmp/work/y.txt"},
		{name: "relative to the root", user: "etc/passwd", haveBase: true, want: "/etc/passwd"},
		{name: "empty path is the base", user: "", base: []string{"d"}, haveBase: true, want: "/d"},
		{name: "no base", user: "a/b", want: "a/b"},
		{name: "base cut short", user: "a", base: []string{"z", "y"}, haveBase: true, cut: true, want: "…/y/z/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b []byte
			for _, s := range c.base {
				b = append(b, s+"\x00"...)
			}
			if got := joinPath([]byte(c.user), b, c.haveBase, c.cut); got != c.want {
				t.Errorf("joinPath(%q, %q) = %q, want %q", c.user, c.base, got, c.want)
			}
		})
	}
}

// fileRecord lays out a file record the way file.c does.
func fileRecord(op fileFileOp, ret int64, flags uint32, rflags fileFileRecordFlags, parts map[fileFilePart]string) []byte {
	var ev fileFileEvent
	h := header(processEventKindKIND_FILE, 100, "cat")
	copy(asBytes(&ev.Hdr), asBytes(&h))
	ev.Uid, ev.Op, ev.Ret, ev.Flags, ev.Rflags = 1000, uint32(op), ret, flags, uint32(rflags)
	data := asBytes(&ev.Data)
	off := 0
	for i := range ev.Len {
		s := parts[fileFilePart(i)]
		off += copy(data[off:], s)
		ev.Len[i] = uint32(len(s))
	}
	return slices.Clone(asBytes(&ev)[:fileDataOffset+off])
}

// ptraceRecord is file.c's record of a ptrace request.
func ptraceRecord(req uint32, ret int64, target uint32) []byte {
	raw := fileRecord(fileFileOpFILE_OP_PTRACE, ret, req, 0, nil)
	var ev fileFileEvent
	copy(asBytes(&ev), raw)
	ev.TargetPid = target
	return slices.Clone(asBytes(&ev)[:fileDataOffset])
}

func fileSeeds() map[string][]byte {
	return map[string][]byte{
		"read-walked":   fileRecord(fileFileOpFILE_OP_READ, 3, 0, fileFileRecordFlagsFILE_PATH_WALKED, map[fileFilePart]string{fileFilePartFILE_PART_WALK: "passwd\x00etc\x00"}),
		"read-failed":   fileRecord(fileFileOpFILE_OP_READ, -13, 0, fileFileRecordFlagsFILE_CHECK_PATH, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "shadow", fileFilePartFILE_PART_BASE: "etc\x00"}),
		"rename":        fileRecord(fileFileOpFILE_OP_RENAME, 0, 0, 0, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "/tmp/a", fileFilePartFILE_PART_NEW_PATH: "b", fileFilePartFILE_PART_NEW_BASE: "tmp\x00"}),
		"mount":         fileRecord(fileFileOpFILE_OP_MOUNT, -1, 0x1000, 0, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "/mnt", fileFilePartFILE_PART_SOURCE: "/dev/vdb", fileFilePartFILE_PART_FSTYPE: "ext4"}),
		"mkdir":         fileRecord(fileFileOpFILE_OP_CREATE, -13, 0o755, fileFileRecordFlagsFILE_DIR, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "x", fileFilePartFILE_PART_BASE: "bin\x00usr\x00"}),
		"symlink":       fileRecord(fileFileOpFILE_OP_LINK, 0, 0, fileFileRecordFlagsFILE_SYMLINK, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "s", fileFilePartFILE_PART_BASE: "home\x00", fileFilePartFILE_PART_SOURCE: "../etc/shadow"}),
		"link":          fileRecord(fileFileOpFILE_OP_LINK, -1, 0, 0, map[fileFilePart]string{fileFilePartFILE_PART_PATH: "/home/h", fileFilePartFILE_PART_NEW_PATH: "shadow", fileFilePartFILE_PART_NEW_BASE: "etc\x00"}),
		"ptrace":        ptraceRecord(unix.PTRACE_SEIZE, 0, 4242),
		"ptrace-failed": ptraceRecord(unix.PTRACE_ATTACH, -1, 1),
		"ptrace-peek":   ptraceRecord(unix.PTRACE_PEEKDATA, 0, 1),
		"bad-op":        fileRecord(99, 0, 0, 0, nil),
		"lengths-wrong": append(fileRecord(fileFileOpFILE_OP_WRITE, 0, 0, 0, nil)[:fileDataOffset-4], 0xff, 0xff, 0xff, 0x7f),
	}
}

func TestDecodeFile(t *testing.T) {
	f := &fileCollector{}
	m := &readMatcher{}
	m.add("/etc", true)
	m.sort()
	f.match.Store(m)
	d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }, file: f}
	seeds := fileSeeds()
	ev, _, err := d.toEvent(seeds["read-walked"])
	if err != nil || ev.Kind != event.KindFileRead || ev.File.Path != "/etc/passwd" || deref64(ev.File.Result) != 3 || ev.Proc.Pid != 100 || ev.Proc.UID == nil || *ev.Proc.UID != 1000 {
		t.Errorf("toEvent(read) = %+v, %v, want file.read of /etc/passwd, result 3, pid 100, uid 1000", ev, err)
	}
	ev, _, err = d.toEvent(seeds["read-failed"])
	if err != nil || ev == nil || ev.File.Path != "/etc/shadow" || ev.File.Errno != "EACCES" || ev.File.Result != nil {
		t.Errorf("toEvent(failed read) = %+v, %v, want /etc/shadow EACCES", ev, err)
	}
	f.match.Store(&readMatcher{})
	if ev, _, err := d.toEvent(seeds["read-failed"]); ev != nil || err != nil {
		t.Errorf("toEvent(failed read, nothing sensitive) = %+v, %v, want nothing", ev, err)
	}
	ev, _, err = d.toEvent(seeds["rename"])
	if err != nil || ev.File.Path != "/tmp/a" || ev.File.NewPath != "/tmp/b" {
		t.Errorf("toEvent(rename) = %+v, %v, want /tmp/a -> /tmp/b", ev, err)
	}
	ev, _, err = d.toEvent(seeds["mount"])
	if err != nil || ev.File.Path != "/mnt" || ev.File.Source != "/dev/vdb" || ev.File.FSType != "ext4" || ev.File.Errno != "EPERM" || ev.File.Flags != 0x1000 {
		t.Errorf("toEvent(mount) = %+v, %v, want /mnt from /dev/vdb ext4 EPERM", ev, err)
	}
	for _, c := range []struct {
		seed string
		want event.File
	}{
		{"mkdir", event.File{Op: "create", Path: "/usr/bin/x", Flags: 0o755, Dir: true, Errno: "EACCES"}},
		{"symlink", event.File{Op: "link", Path: "/home/s", Target: "../etc/shadow", Symlink: true, Result: event.I64(0)}},
		{"link", event.File{Op: "link", Path: "/home/h", Target: "/etc/shadow", Errno: "EPERM"}},
	} {
		ev, _, err := d.toEvent(seeds[c.seed])
		if err != nil || ev.Kind != event.FileKind(c.want.Op) || !reflect.DeepEqual(*ev.File, c.want) {
			t.Errorf("toEvent(%s) = %+v, %v, want %+v", c.seed, ev, err, c.want)
		}
	}
	for _, c := range []struct {
		seed  string
		want  event.Ptrace
		errno string
	}{
		{"ptrace", event.Ptrace{Request: "seize", TargetPid: 4242}, ""},
		{"ptrace-failed", event.Ptrace{Request: "attach", TargetPid: 1}, "EPERM"},
	} {
		ev, _, err := d.toEvent(seeds[c.seed])
		if err != nil || ev.Kind != event.KindPtrace || ev.File != nil || ev.Proc.Ptrace == nil || *ev.Proc.Ptrace != c.want || ev.Proc.Errno != c.errno || ev.Proc.Pid != 100 {
			t.Errorf("toEvent(%s) = %+v, %v, want process.ptrace %+v by pid 100, errno %q", c.seed, ev, err, c.want, c.errno)
		}
	}
	for _, name := range []string{"bad-op", "lengths-wrong", "ptrace-peek"} {
		if _, _, err := d.toEvent(seeds[name]); !errors.Is(err, errDecode) {
			t.Errorf("toEvent(%s) = %v, want errDecode", name, err)
		}
	}
}

// FuzzDecodeFile checks that no file record makes the decoder panic, and
// that every event it accepts is a valid file or ptrace event.
func FuzzDecodeFile(f *testing.F) {
	for _, b := range fileSeeds() {
		f.Add(b)
	}
	fc := &fileCollector{}
	m := &readMatcher{}
	m.add("/", true)
	m.sort()
	fc.match.Store(m)
	d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }, file: fc}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) >= 4 {
			// Mostly file records.
			raw[0], raw[1], raw[2], raw[3] = byte(processEventKindKIND_FILE), 0, 0, 0
		}
		ev, _, err := d.toEvent(raw)
		if err != nil {
			if !errors.Is(err, errDecode) {
				t.Fatalf("toEvent() = %v, want an error wrapping errDecode", err)
			}
			return
		}
		if ev == nil {
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("toEvent().Validate() = %v", err)
		}
		if _, err := event.Marshal(ev); err != nil {
			t.Fatalf("Marshal(toEvent()) = %v", err)
		}
		if ev.Kind == event.KindPtrace {
			if ev.File != nil || ev.Proc == nil || ev.Proc.Ptrace == nil {
				t.Fatalf("toEvent() = %+v, want a ptrace event", ev)
			}
			return
		}
		if ev.File == nil || ev.Proc == nil || ev.Kind != event.FileKind(ev.File.Op) {
			t.Fatalf("toEvent() = %+v, want a file event", ev)
		}
	})
}

func deref64(p *int64) int64 {
	if p == nil {
		return -1 << 62
	}
	return *p
}

// TestFileFuzzSeeds writes the seed corpus of FuzzDecodeFile with -update.
func TestFileFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeFile")
	if !*update {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("seed corpus %s missing (run go test -run TestFileFuzzSeeds -update): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fileSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
