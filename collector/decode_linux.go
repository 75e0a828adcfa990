//go:build 386 || amd64 || arm64

package collector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// errDecode is wrapped by every error of toEvent.
var errDecode = errors.New("collector: malformed record")

// oomVictim is an OOM victim reported by the kernel.
type oomVictim struct {
	watched uint64
	cgroup  uint64
	pid     int32
	comm    string
}

// decoder turns ring buffer records into events. It is owned by the reader
// goroutine: its scratch struct is reused from record to record.
type decoder struct {
	// bootOffset is CLOCK_REALTIME - CLOCK_BOOTTIME in ns, measured at start.
	bootOffset int64
	host       string
	// session maps a watched cgroup id to its session id.
	session func(watched uint64) string
	exec    processExecEvent
	// exe is the executed file of the last exec record decoded.
	exe exeID
	// env names the environment variables recorded at exec.
	env envNames
	// net names addresses and gives reasons in net events; nil for none.
	net *netCollector
	// file holds the read rules and the scratch record of file events;
	// nil for none.
	file *fileCollector
	// lineage is the table of forks, execs and exits that names each
	// exec's ancestors and pipe peers (lineage.go); nil for none.
	lineage *lineage
}

// kindName maps a BPF event kind to the event kind.
var kindName = [...]string{
	processEventKindKIND_EXEC:        event.KindExec,
	processEventKindKIND_FORK:        event.KindFork,
	processEventKindKIND_EXIT:        event.KindExit,
	processEventKindKIND_EXEC_FAILED: event.KindExecFailed,
	processEventKindKIND_OOM_VICTIM:  "oom_victim",
	// Kernel drops of file records are counted for all file ops together.
	processEventKindKIND_FILE:        "file",
	processEventKindKIND_NET_CONNECT: event.KindNetConnect,
	processEventKindKIND_NET_CLOSE:   event.KindNetClose,
	processEventKindKIND_NET_LISTEN:  event.KindNetListen,
	processEventKindKIND_NET_ACCEPT:  event.KindNetAccept,
	// Kernel drops of unix records are counted for connects and sends
	// together, as net.connect.
	processEventKindKIND_NET_UNIX:   event.KindNetConnect,
	processEventKindKIND_NET_SOCKET: event.KindNetSocket,
	processEventKindKIND_DENIED:     event.KindDenied,
}

const numKinds = int(processEventKindKIND_MAX)

// asBytes returns the memory of *p as a byte slice.
func asBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// load copies a fixed-size record into *dst.
func load[T any](dst *T, raw []byte) error {
	b := asBytes(dst)
	if len(raw) < len(b) {
		return fmt.Errorf("%w: %d bytes, want %d", errDecode, len(raw), len(b))
	}
	copy(b, raw)
	return nil
}

// cString returns the bytes of a C char array up to the first NUL.
func cString(a []int8) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// wall converts a CLOCK_BOOTTIME timestamp in ns to wall time.
func (d *decoder) wall(boot uint64) time.Time {
	if boot == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(boot)+d.bootOffset).UTC()
}

func (d *decoder) envelope(kind string, h *processEventHeader) *event.Event {
	e := &event.Event{
		V:      event.SchemaVersion,
		TS:     d.wall(h.Ts),
		Host:   d.host,
		Kind:   kind,
		Source: event.SourceKernel,
	}
	if h.Watched != 0 && d.session != nil {
		e.SessionID = d.session(h.Watched)
	}
	return e
}

// toEvent converts one ring buffer record to an event. An OOM victim record
// returns a nil event and the victim instead; a file read that is not
// sensitive returns neither. Secrets in argv are masked
// (event.RedactArgv) before anything else sees them. It never panics on malformed
// input: every length is checked against the record.
func (d *decoder) toEvent(raw []byte) (*event.Event, *oomVictim, error) {
	if len(raw) < int(unsafe.Sizeof(processEventHeader{})) {
		return nil, nil, fmt.Errorf("%w: %d bytes is shorter than the header", errDecode, len(raw))
	}
	kind := processEventKind(binary.NativeEndian.Uint32(raw))
	// The header's ts is at the same offset in every record.
	if binary.NativeEndian.Uint64(raw[unsafe.Offsetof(processEventHeader{}.Ts):]) == 0 {
		return nil, nil, fmt.Errorf("%w: no timestamp", errDecode)
	}
	switch kind {
	case processEventKindKIND_EXEC:
		return d.exec1(raw)
	case processEventKindKIND_FORK:
		return d.fork1(raw)
	case processEventKindKIND_EXIT:
		return d.exit1(raw)
	case processEventKindKIND_EXEC_FAILED:
		return d.execFailed1(raw)
	case processEventKindKIND_NET_CONNECT, processEventKindKIND_NET_CLOSE, processEventKindKIND_NET_LISTEN, processEventKindKIND_NET_ACCEPT:
		return d.net1(kind, raw)
	case processEventKindKIND_NET_UNIX:
		return d.unix1(raw)
	case processEventKindKIND_NET_SOCKET:
		return d.socket1(raw)
	case processEventKindKIND_FILE:
		return d.file1(raw)
	case processEventKindKIND_OOM_VICTIM:
		return oom1(raw)
	case processEventKindKIND_DENIED:
		return d.denied1(raw)
	}
	return nil, nil, fmt.Errorf("%w: unknown kind %d", errDecode, kind)
}

// fork1 converts a fork record (struct fork_event) to a process.fork event
// of the child.
func (d *decoder) fork1(raw []byte) (*event.Event, *oomVictim, error) {
	var r processForkEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	e := d.envelope(event.KindFork, &r.Hdr)
	e.Proc = &event.Proc{
		Pid:      int32(r.ChildPid),
		PPid:     int32(r.Hdr.Pid),
		UID:      event.U32(r.Uid),
		Comm:     cString(r.Hdr.Comm[:]),
		StartTS:  d.wall(r.ChildStartTime),
		CgroupID: r.Hdr.CgroupId,
	}
	d.lineage.fork(e.Proc.Pid, e.Proc.PPid, e.Proc.Comm, r.ChildStartTime)
	return e, nil, nil
}

// exit1 converts an exit record (struct exit_event) to a process.exit
// event.
func (d *decoder) exit1(raw []byte) (*event.Event, *oomVictim, error) {
	var r processExitEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	e := d.envelope(event.KindExit, &r.Hdr)
	e.Proc = &event.Proc{
		Pid:      int32(r.Hdr.Pid),
		PPid:     int32(r.Ppid),
		Comm:     cString(r.Hdr.Comm[:]),
		StartTS:  d.wall(r.StartTime),
		CgroupID: r.Hdr.CgroupId,
	}
	// The wait status: a signal number in the low 7 bits, or the exit
	// status in bits 8-15.
	if sig := int32(r.ExitCode & 0x7f); sig != 0 {
		e.Proc.Signal = sig
	} else {
		e.Proc.ExitCode = event.I32(int32(r.ExitCode>>8) & 0xff)
	}
	d.lineage.exit(e.Proc.Pid, r.StartTime)
	return e, nil, nil
}

// execFailed1 converts a failed-exec record (struct exec_failed_event) to
// a process.exec_failed event.
func (d *decoder) execFailed1(raw []byte) (*event.Event, *oomVictim, error) {
	var r processExecFailedEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	if r.FilenameLen > uint32(len(r.Filename)) {
		return nil, nil, fmt.Errorf("%w: filename length %d", errDecode, r.FilenameLen)
	}
	if r.Ret >= 0 {
		return nil, nil, fmt.Errorf("%w: exec_failed with return value %d", errDecode, r.Ret)
	}
	e := d.envelope(event.KindExecFailed, &r.Hdr)
	e.Proc = &event.Proc{
		Pid:      int32(r.Hdr.Pid),
		UID:      event.U32(r.Uid),
		Comm:     cString(r.Hdr.Comm[:]),
		Exe:      string(asBytes(&r.Filename)[:r.FilenameLen]),
		CgroupID: r.Hdr.CgroupId,
		Errno:    errnoName(-r.Ret),
	}
	return e, nil, nil
}

// oom1 converts an OOM victim record (struct oom_event) to the victim.
func oom1(raw []byte) (*event.Event, *oomVictim, error) {
	var r processOomEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	return nil, &oomVictim{
		watched: r.Hdr.Watched,
		cgroup:  r.Hdr.CgroupId,
		pid:     int32(r.Hdr.Pid),
		comm:    cString(r.Hdr.Comm[:]),
	}, nil
}

// execDataOffset is where exec_event.data starts.
var execDataOffset = int(unsafe.Offsetof(processExecEvent{}.Data))

// exec1 converts an exec record (struct exec_event) to a process.exec
// event with its lineage (ancestors, pipe peers: d.lineage), and leaves the
// executed file's identity in d.exe for the hash.
func (d *decoder) exec1(raw []byte) (*event.Event, *oomVictim, error) {
	if len(raw) < execDataOffset {
		return nil, nil, fmt.Errorf("%w: exec record of %d bytes, want at least %d", errDecode, len(raw), execDataOffset)
	}
	r := &d.exec
	buf := asBytes(r)
	n := copy(buf, raw)
	data := buf[execDataOffset:n]
	parts, err := splitExecData(data, r.FilenameLen, r.CwdLen, r.ExeLen, r.ArgvLen, r.TailLen, r.EnvLen)
	if err != nil {
		return nil, nil, err
	}
	filename, cwd, exe, argv, tail, env := parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]
	flags := processExecFlags(r.Flags)

	e := d.envelope(event.KindExec, &r.Hdr)
	e.Proc = &event.Proc{
		Pid:           int32(r.Hdr.Pid),
		PPid:          int32(r.Ppid),
		UID:           event.U32(r.Uid),
		EUID:          event.U32(r.Euid),
		Comm:          cString(r.Hdr.Comm[:]),
		Exe:           string(filename),
		ExePath:       exePath(exe, flags),
		ExeDev:        userDev(r.ExeDev),
		ExeIno:        r.ExeIno,
		Fileless:      r.ExeIno != 0 && r.ExeNlink == 0,
		ArgvTruncated: flags&processExecFlagsEXEC_ARGV_TRUNCATED != 0,
		Argc:          event.U32(r.Argc),
		Cwd:           joinCwd(cwd, flags&processExecFlagsEXEC_CWD_TRUNCATED != 0),
		StartTS:       d.wall(r.StartTime),
		CgroupID:      r.Hdr.CgroupId,
		StdinPipe:     r.StdinPipe,
		StdoutPipe:    r.StdoutPipe,
	}
	setArgv(e.Proc, argv, tail)
	if e.Proc.ArgvTruncated {
		e.Proc.ArgvSize = uint64(r.ArgvSize)
	}
	e.Proc.Env = d.env.pick(env)
	e.Proc.EnvTruncated = flags&processExecFlagsEXEC_ENV_TRUNCATED != 0
	// (uid_t)-1 is the loginuid of a task that never logged in.
	if r.Auid != ^uint32(0) {
		e.Proc.AUID = event.U32(r.Auid)
	}
	d.exe = exeID{dev: e.Proc.ExeDev, ino: r.ExeIno, ctimeSec: r.ExeCtimeSec, ctimeNsec: r.ExeCtimeNsec &^ ctimeQueried}
	if flags&processExecFlagsEXEC_EXE_OVERLAY != 0 {
		// The kernel could not name the real file behind the overlay.
		if id, ok := overlayExe(e.Proc.Pid); ok {
			d.exe = id
			e.Proc.ExeDev, e.Proc.ExeIno = id.dev, id.ino
		}
	}
	d.lineage.exec(e.Proc, r.StartTime)
	return e, nil, nil
}

// ctimeQueried is the flag that multigrain timestamps (Linux 6.13+) keep in
// the top bit of inode.i_ctime_nsec (I_CTIME_QUERIED); the change time is
// the rest, as inode_get_ctime_nsec reads it.
const ctimeQueried = 1 << 31

// splitExecData cuts data into the consecutive parts of the given lengths.
func splitExecData(data []byte, lens ...uint32) ([][]byte, error) {
	out := make([][]byte, len(lens))
	var at uint64
	for i, l := range lens {
		end := at + uint64(l)
		if end > uint64(len(data)) {
			return nil, fmt.Errorf("%w: exec lengths %v exceed %d data bytes", errDecode, lens, len(data))
		}
		out[i] = data[at:end]
		at = end
	}
	return out, nil
}

// exePath names the executed file as the kernel's d_path does: the path of
// bprm->file, with " (deleted)" for an unlinked or pseudo file.
func exePath(exe []byte, flags processExecFlags) string {
	if len(exe) == 0 {
		return ""
	}
	p := joinCwd(exe, flags&processExecFlagsEXEC_EXE_TRUNCATED != 0)
	if flags&processExecFlagsEXEC_EXE_DELETED != 0 {
		p += " (deleted)"
	}
	return p
}

// userDev converts the kernel's internal dev_t (12 bits of major, 20 of
// minor) to the encoding of stat's st_dev.
func userDev(k uint32) uint64 {
	if k == 0 {
		return 0
	}
	return unix.Mkdev(k>>20, k&0xfffff)
}

// setArgv fills argv, its raw bytes when they are not valid UTF-8, and the
// tail of a truncated argv, all redacted. The tail is redacted as the
// continuation of the same command line, so that a flag's value after the
// padding is masked as it would be in argv.
func setArgv(p *event.Proc, argv, tail []byte) {
	p.Argv = event.RedactArgv(splitArgv(argv))
	if !utf8.Valid(argv) {
		p.ArgvRaw = joinArgv(p.Argv, bytes.HasSuffix(argv, []byte{0}))
	}
	if len(tail) == 0 {
		return
	}
	prog := ""
	if len(p.Argv) > 0 {
		prog = p.Argv[0]
	}
	t := event.RedactArgv(append([]string{prog}, splitArgv(tail)...))[1:]
	p.ArgvTail = t
	if !utf8.Valid(tail) {
		p.ArgvTailRaw = joinArgv(t, bytes.HasSuffix(tail, []byte{0}))
	}
}

// joinArgv lays arguments out as the kernel does, each NUL-terminated; the
// last one only when nul is set (an argument cut by truncation has none).
func joinArgv(args []string, nul bool) []byte {
	var b []byte
	for i, a := range args {
		b = append(b, a...)
		if i < len(args)-1 || nul {
			b = append(b, 0)
		}
	}
	return b
}

// envNames is the set of environment variables recorded at exec
// (WithExecEnv).
type envNames map[string]struct{}

// pick returns the NAME=value entries of the environment area env whose
// names are in the set, in order and redacted. Entries without "=" are not
// variables and are skipped.
func (n envNames) pick(env []byte) []string {
	if len(n) == 0 || len(env) == 0 {
		return nil
	}
	var out []string
	for entry := range bytes.SplitSeq(bytes.TrimSuffix(env, []byte{0}), []byte{0}) {
		name, _, ok := bytes.Cut(entry, []byte{'='})
		if !ok {
			continue
		}
		if _, want := n[string(name)]; want {
			out = append(out, event.Redact(string(entry)))
		}
	}
	return out
}

// splitArgv splits the argument area at the NULs that end each argument.
// Empty arguments are kept. A last argument cut by truncation has no NUL and
// is kept as far as it goes.
func splitArgv(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{0})
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// joinCwd assembles the path from the components the kernel wrote from the
// leaf up to the root, each NUL-terminated. A path whose walk was cut short
// starts with "…/" instead of "/".
func joinCwd(b []byte, truncated bool) string {
	b = bytes.TrimSuffix(b, []byte{0})
	prefix := "/"
	if truncated {
		prefix = "…/"
	}
	// One allocation: every file event has a walk, so this runs for most
	// records.
	var s strings.Builder
	s.Grow(len(prefix) + len(b))
	s.WriteString(prefix)
	for end := len(b); end > 0; {
		i := bytes.LastIndexByte(b[:end], 0)
		s.Write(b[i+1 : end])
		if i < 0 {
			break
		}
		s.WriteByte('/')
		end = i
	}
	return s.String()
}

// errnoName returns the symbolic name of an errno ("ENOENT"), or its number
// when it has none.
func errnoName(n int32) string {
	if s := unix.ErrnoName(syscall.Errno(n)); s != "" {
		return s
	}
	return fmt.Sprintf("errno %d", n)
}
