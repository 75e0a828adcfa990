//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sandtrail/sandtrail/record/event"
)

var update = flag.Bool("update", false, "rewrite the fuzz seed corpus in testdata/")

func setComm(h *processEventHeader, s string) {
	for i := range h.Comm {
		h.Comm[i] = 0
	}
	for i := 0; i < len(s) && i < len(h.Comm)-1; i++ {
		h.Comm[i] = int8(s[i])
	}
}

func header(kind processEventKind, pid uint32, comm string) processEventHeader {
	h := processEventHeader{Kind: uint32(kind), Pid: pid, Ts: 1_000_000_123, CgroupId: 77, Watched: 42}
	setComm(&h, comm)
	return h
}

// execRecord lays out an exec record the way process.c does.
func execRecord(filename string, cwdLeafFirst []string, argv string, flags processExecFlags) []byte {
	var ev processExecEvent
	ev.Hdr = header(processEventKindKIND_EXEC, 100, "echo")
	ev.Ppid, ev.Uid, ev.Euid, ev.Auid = 99, 1000, 0, ^uint32(0)
	ev.StartTime = 999_000_000
	ev.StdinPipe, ev.StdoutPipe = 0, 5555
	data := asBytes(&ev.Data)
	off := copy(data, filename)
	ev.FilenameLen = uint32(len(filename))
	start := off
	for _, c := range cwdLeafFirst {
		off += copy(data[off:], c+"\x00")
	}
	ev.CwdLen = uint32(off - start)
	off += copy(data[off:], argv)
	ev.ArgvLen = uint32(len(argv))
	ev.Flags = uint32(flags)
	return slices.Clone(asBytes(&ev)[:execDataOffset+off])
}

// identityRecord is an exec record with the executed file's identity, a
// path walk of a memfd, non-UTF-8 argv bytes, an argv tail and an
// environment.
func identityRecord() []byte {
	var ev processExecEvent
	ev.Hdr = header(processEventKindKIND_EXEC, 100, "x")
	ev.Auid = ^uint32(0)
	data := asBytes(&ev.Data)
	parts := []string{"/proc/self/fd/3", "", "memfd:x\x00", "x\x00a\xffb\x00--token\x00ghp", "_t\x00--token\x00s3cr3t\x00",
		"HOME=/h\x00LD_PRELOAD=/tmp/p.so\x00http_proxy=http://u:pw@127.0.0.1:3128\x00"}
	lens := []*uint32{&ev.FilenameLen, &ev.CwdLen, &ev.ExeLen, &ev.ArgvLen, &ev.TailLen, &ev.EnvLen}
	off := 0
	for i, p := range parts {
		off += copy(data[off:], p)
		*lens[i] = uint32(len(p))
	}
	ev.Flags = uint32(processExecFlagsEXEC_EXE_DELETED | processExecFlagsEXEC_ARGV_TRUNCATED)
	ev.ExeIno, ev.ExeDev, ev.ExeNlink = 1030, 1, 0
	ev.ExeCtimeNsec = 5 | ctimeQueried
	ev.ArgvSize, ev.Argc = 99999, 7
	return slices.Clone(asBytes(&ev)[:execDataOffset+off])
}

func fixedRecord[T any](v T) []byte { return slices.Clone(asBytes(&v)) }

func exitRecord(code uint32) []byte {
	return fixedRecord(processExitEvent{Hdr: header(processEventKindKIND_EXIT, 100, "sh"), Ppid: 1, ExitCode: code, StartTime: 5})
}

func failedRecord(path string, ret int32) []byte {
	ev := processExecFailedEvent{Hdr: header(processEventKindKIND_EXEC_FAILED, 100, "sh"), Uid: 1000, Ret: ret, FilenameLen: uint32(len(path))}
	copy(asBytes(&ev.Filename), path)
	return fixedRecord(ev)
}

func seeds() map[string][]byte {
	return map[string][]byte{
		"exec":           execRecord("/bin/echo", []string{"tmp"}, "/bin/echo\x00a\x00b c\x00", 0),
		"exec-empty-arg": execRecord("/bin/true", nil, "/bin/true\x00\x00x\x00", 0),
		"exec-cut":       execRecord("/bin/true", []string{"c", "b", "a"}, "/bin/true\x00abc", processExecFlagsEXEC_ARGV_TRUNCATED),
		"fork":           fixedRecord(processForkEvent{Hdr: header(processEventKindKIND_FORK, 99, "sh"), ChildPid: 100, Uid: 1000, ChildStartTime: 5}),
		"exit-7":         exitRecord(7 << 8),
		"exit-signal":    exitRecord(9),
		"exec-failed":    failedRecord("/missing", -2),
		"oom":            fixedRecord(processOomEvent{Hdr: header(processEventKindKIND_OOM_VICTIM, 100, "tail"), Uid: 0}),
		"denied":         denyRecord(0),
		"short":          {1, 0, 0, 0},
		"exec-identity":  identityRecord(),
	}
}

func TestToEvent(t *testing.T) {
	d := &decoder{bootOffset: 1_700_000_000_000_000_000, session: func(w uint64) string { return fmt.Sprintf("s%d", w) },
		env: envNames{"LD_PRELOAD": {}, "http_proxy": {}}}
	wall := func(boot int64) time.Time { return time.Unix(0, boot+d.bootOffset).UTC() }
	tooLong := execRecord("/bin/true", nil, "x\x00", 0)
	binary.NativeEndian.PutUint32(tooLong[unsafe.Offsetof(processExecEvent{}.ArgvLen):], 1<<20)
	noTS := exitRecord(0)
	binary.NativeEndian.PutUint64(noTS[unsafe.Offsetof(processEventHeader{}.Ts):], 0)
	unknown := exitRecord(0)
	binary.NativeEndian.PutUint32(unknown[unsafe.Offsetof(processEventHeader{}.Kind):], 99)
	for _, c := range []struct {
		name    string
		raw     []byte
		kind    string
		check   func(t *testing.T, p *event.Proc)
		oom     bool
		wantErr bool
	}{
		{name: "exec", raw: seeds()["exec"], kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			want := event.Proc{Pid: 100, PPid: 99, UID: event.U32(1000), EUID: event.U32(0), Comm: "echo", Exe: "/bin/echo",
				Argv: []string{"/bin/echo", "a", "b c"}, Cwd: "/tmp", StartTS: wall(999_000_000), CgroupID: 77, StdoutPipe: 5555}
			if p.UID == nil || *p.UID != 1000 || p.EUID == nil || *p.EUID != 0 || p.AUID != nil {
				t.Errorf("toEvent(exec) uid, euid, auid = %v, %v, %v, want 1000, 0, nil", deref(p.UID), deref(p.EUID), deref(p.AUID))
			}
			got := *p
			got.UID, got.EUID, want.UID, want.EUID, got.Argc = nil, nil, nil, nil, nil
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Errorf("toEvent(exec).proc = %+v, want %+v", got, want)
			}
		}},
		{name: "exec identity", raw: seeds()["exec-identity"], kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			if p.Exe != "/proc/self/fd/3" || p.ExePath != "/memfd:x (deleted)" || !p.Fileless || p.ExeIno != 1030 || p.ExeDev != 1 {
				t.Errorf("toEvent() exe, exe_path, fileless, ino, dev = %q, %q, %v, %d, %d, want /proc/self/fd/3, /memfd:x (deleted), true, 1030, 1",
					p.Exe, p.ExePath, p.Fileless, p.ExeIno, p.ExeDev)
			}
			if want := "x\x00a\xffb\x00--token\x00***"; string(p.ArgvRaw) != want {
				t.Errorf("toEvent().argv_raw = %q, want %q", p.ArgvRaw, want)
			}
			if want := []string{"_t", "--token", "***"}; !slices.Equal(p.ArgvTail, want) || p.ArgvTailRaw != nil {
				t.Errorf("toEvent().argv_tail, raw = %q, %q, want %q (the flag's value masked), nil", p.ArgvTail, p.ArgvTailRaw, want)
			}
			if p.ArgvSize != 99999 || p.Argc == nil || *p.Argc != 7 {
				t.Errorf("toEvent().argv_size, argc = %d, %v, want 99999, 7", p.ArgvSize, deref(p.Argc))
			}
			if want := []string{"LD_PRELOAD=/tmp/p.so", "http_proxy=http://u:***@127.0.0.1:3128"}; !slices.Equal(p.Env, want) {
				t.Errorf("toEvent().env = %q, want %q", p.Env, want)
			}
		}},
		{name: "empty argument kept", raw: seeds()["exec-empty-arg"], kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			if want := []string{"/bin/true", "", "x"}; !slices.Equal(p.Argv, want) || p.Cwd != "/" {
				t.Errorf("toEvent(exec).argv, cwd = %q, %q, want %q, /", p.Argv, p.Cwd, want)
			}
		}},
		{name: "truncated argv keeps the cut argument", raw: seeds()["exec-cut"], kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			if want := []string{"/bin/true", "abc"}; !slices.Equal(p.Argv, want) || !p.ArgvTruncated || p.Cwd != "/a/b/c" {
				t.Errorf("toEvent(exec) = argv %q truncated %v cwd %q, want %q true /a/b/c", p.Argv, p.ArgvTruncated, p.Cwd, want)
			}
		}},
		{name: "cwd walk cut short", raw: execRecord("/x", []string{"b", "a"}, "", processExecFlagsEXEC_CWD_TRUNCATED), kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			if p.Cwd != "…/a/b" || p.Argv != nil {
				t.Errorf("toEvent(exec).cwd, argv = %q, %q, want …/a/b, nil", p.Cwd, p.Argv)
			}
		}},
		{name: "argv secrets masked", raw: execRecord("/usr/bin/curl", nil, "curl\x00-u\x00alice:hunter2\x00--password\x00s3cret\x00", 0), kind: event.KindExec, check: func(t *testing.T, p *event.Proc) {
			if want := []string{"curl", "-u", "alice:" + event.Mask, "--password", event.Mask}; !slices.Equal(p.Argv, want) {
				t.Errorf("toEvent(exec).argv = %q, want %q", p.Argv, want)
			}
		}},
		{name: "fork", raw: seeds()["fork"], kind: event.KindFork, check: func(t *testing.T, p *event.Proc) {
			if p.Pid != 100 || p.PPid != 99 || p.Comm != "sh" {
				t.Errorf("toEvent(fork) = pid %d ppid %d comm %q, want 100 99 sh", p.Pid, p.PPid, p.Comm)
			}
		}},
		{name: "exit status", raw: seeds()["exit-7"], kind: event.KindExit, check: func(t *testing.T, p *event.Proc) {
			if p.ExitCode == nil || *p.ExitCode != 7 || p.Signal != 0 {
				t.Errorf("toEvent(exit) = code %v signal %d, want 7 0", deref32(p.ExitCode), p.Signal)
			}
		}},
		{name: "killed by a signal", raw: seeds()["exit-signal"], kind: event.KindExit, check: func(t *testing.T, p *event.Proc) {
			if p.ExitCode != nil || p.Signal != 9 {
				t.Errorf("toEvent(exit) = code %v signal %d, want nil 9", deref32(p.ExitCode), p.Signal)
			}
		}},
		{name: "exec failed", raw: seeds()["exec-failed"], kind: event.KindExecFailed, check: func(t *testing.T, p *event.Proc) {
			if p.Exe != "/missing" || p.Errno != "ENOENT" {
				t.Errorf("toEvent(exec_failed) = %q %q, want /missing ENOENT", p.Exe, p.Errno)
			}
		}},
		{name: "oom victim", raw: seeds()["oom"], oom: true},
		{name: "short record", raw: seeds()["short"], wantErr: true},
		{name: "lengths past the record", raw: tooLong, wantErr: true},
		{name: "no timestamp", raw: noTS, wantErr: true},
		{name: "unknown kind", raw: unknown, wantErr: true},
		{name: "truncated fixed record", raw: exitRecord(0)[:40], wantErr: true},
		{name: "exec failed with a success", raw: failedRecord("/x", 0), wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, oom, err := d.toEvent(c.raw)
			if c.wantErr {
				if err == nil || !errors.Is(err, errDecode) {
					t.Fatalf("toEvent() = %v, %v, %v, want an error wrapping errDecode", ev, oom, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("toEvent() = %v, want no error", err)
			}
			if c.oom {
				if oom == nil || ev != nil || oom.pid != 100 || oom.comm != "tail" || oom.watched != 42 || oom.cgroup != 77 {
					t.Errorf("toEvent(oom) = %v, %+v, want nil and victim 100 tail in 42/77", ev, oom)
				}
				return
			}
			if ev.Kind != c.kind || ev.SessionID != "s42" || ev.Source != event.SourceKernel || !ev.TS.Equal(wall(1_000_000_123)) {
				t.Errorf("toEvent() = kind %q session %q source %q ts %v, want %q s42 kernel %v", ev.Kind, ev.SessionID, ev.Source, ev.TS, c.kind, wall(1_000_000_123))
			}
			if err := ev.Validate(); err != nil {
				t.Errorf("toEvent().Validate() = %v", err)
			}
			c.check(t, ev.Proc)
		})
	}
}

// TestFuzzSeeds writes the seed corpus with -update.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzToEvent")
	if !*update {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("seed corpus %s missing (run go test -run TestFuzzSeeds -update): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzToEvent checks that no record makes the decoder panic, and that every
// event it accepts is valid and encodable.
func FuzzToEvent(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	// One decoder for every input: its lineage table sees them all.
	d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }, env: envNames{"LD_PRELOAD": {}, "http_proxy": {}},
		lineage: newLineage()}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, oom, err := d.toEvent(raw)
		if err != nil {
			if !errors.Is(err, errDecode) {
				t.Fatalf("toEvent() = %v, want an error wrapping errDecode", err)
			}
			return
		}
		if oom != nil || ev == nil { // an OOM victim, or a read that is not sensitive
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("toEvent().Validate() = %v", err)
		}
		if _, err := event.Marshal(ev); err != nil {
			t.Fatalf("Marshal(toEvent()) = %v", err)
		}
		if ev.Proc == nil || strings.Contains(ev.Kind, " ") {
			t.Fatalf("toEvent() = %+v, want a process event", ev)
		}
	})
}
