//go:build 386 || amd64 || arm64

package collector

import (
	"fmt"
	"path"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// fileOpName maps file.c's op to event.File.Op.
var fileOpName = [...]string{
	fileFileOpFILE_OP_READ:     "read",
	fileFileOpFILE_OP_WRITE:    "write",
	fileFileOpFILE_OP_CREATE:   "create",
	fileFileOpFILE_OP_DELETE:   "delete",
	fileFileOpFILE_OP_RENAME:   "rename",
	fileFileOpFILE_OP_MOUNT:    "mount",
	fileFileOpFILE_OP_TRUNCATE: "truncate",
	fileFileOpFILE_OP_CHMOD:    "chmod",
	fileFileOpFILE_OP_LINK:     "link",
	fileFileOpFILE_OP_PTRACE:   "ptrace",
}

// ptraceRequest names the ptrace requests that file.c records.
var ptraceRequest = map[uint32]string{
	unix.PTRACE_TRACEME: "traceme",
	unix.PTRACE_ATTACH:  "attach",
	unix.PTRACE_SEIZE:   "seize",
}

// fileDataOffset is where file_event.data starts.
var fileDataOffset = int(unsafe.Offsetof(fileFileEvent{}.Data))

// fileParts are the variable-length parts of a file record, by
// fileFilePart.
type fileParts [fileFilePartFILE_PARTS][]byte

// file1 converts a file record. It returns a nil event for a read that Go
// decides (FILE_CHECK_PATH) and finds not sensitive.
func (d *decoder) file1(raw []byte) (*event.Event, *oomVictim, error) {
	r, parts, err := d.fileRecord(raw)
	if err != nil {
		return nil, nil, err
	}
	if r.Op == uint32(fileFileOpFILE_OP_PTRACE) {
		e, err := d.ptrace1(r)
		return e, nil, err
	}
	fl := fileFileRecordFlags(r.Rflags)
	op := fileOpName[r.Op]
	if fl&fileFileRecordFlagsFILE_UMOUNT != 0 {
		// umount2: its flags are MNT_*, not mount(2)'s MS_*.
		op = "umount"
	}
	var p string
	if fl&fileFileRecordFlagsFILE_PATH_WALKED != 0 {
		p = joinCwd(parts[fileFilePartFILE_PART_WALK], fl&fileFileRecordFlagsFILE_WALK_CUT != 0)
	} else {
		p = joinPath(parts[fileFilePartFILE_PART_PATH], parts[fileFilePartFILE_PART_BASE],
			fl&fileFileRecordFlagsFILE_NO_BASE == 0, fl&fileFileRecordFlagsFILE_BASE_CUT != 0)
	}
	if r.Op == uint32(fileFileOpFILE_OP_READ) && !d.readRecorded(fl, p) {
		return nil, nil, nil
	}
	f := fileObject(r, &parts, op, p)
	errno, err := resultErrno(r.Ret)
	if err != nil {
		return nil, nil, err
	}
	if f.Errno = errno; errno == "" {
		f.Result = event.I64(r.Ret)
	}
	e := d.envelope(event.FileKind(op), (*processEventHeader)(&r.Hdr))
	e.File = f
	e.Proc = fileProc(r)
	return e, nil, nil
}

// fileRecord copies raw into a file record and cuts its data into parts,
// checking the op and that the parts' lengths fit the data.
func (d *decoder) fileRecord(raw []byte) (*fileFileEvent, fileParts, error) {
	var parts fileParts
	if len(raw) < fileDataOffset {
		return nil, parts, fmt.Errorf("%w: file record of %d bytes, want at least %d", errDecode, len(raw), fileDataOffset)
	}
	// The collector's decoder reuses one record struct (20 KiB); a bare
	// decoder (tests, fuzzing) allocates one per record.
	var r *fileFileEvent
	if d.file != nil {
		r = &d.file.scratch
	} else {
		r = new(fileFileEvent)
	}
	buf := asBytes(r)
	n := copy(buf, raw)
	data := buf[fileDataOffset:n]
	if r.Op == 0 || r.Op >= uint32(len(fileOpName)) {
		return nil, parts, fmt.Errorf("%w: file op %d", errDecode, r.Op)
	}
	var off uint64
	for i, l := range r.Len {
		if off+uint64(l) > uint64(len(data)) {
			return nil, parts, fmt.Errorf("%w: file part lengths exceed %d data bytes", errDecode, len(data))
		}
		parts[i] = data[off : off+uint64(l)]
		off += uint64(l)
	}
	return r, parts, nil
}

// readRecorded reports whether a read of p becomes an event: always,
// unless the kernel left the decision to Go (FILE_CHECK_PATH) or the read
// matcher decides every read, and then only when p is sensitive.
func (d *decoder) readRecorded(fl fileFileRecordFlags, p string) bool {
	m := (*readMatcher)(nil)
	if d.file != nil {
		m = d.file.match.Load()
	}
	if fl&fileFileRecordFlagsFILE_CHECK_PATH != 0 || (m != nil && m.all) {
		return m != nil && m.sensitive(p)
	}
	return true
}

// fileObject is the event.File of record r, of op on path p, with the new
// path, link target or mount source its op has.
func fileObject(r *fileFileEvent, parts *fileParts, op, p string) *event.File {
	fl := fileFileRecordFlags(r.Rflags)
	f := &event.File{Op: op, Path: p, Flags: r.Flags, Dir: fl&fileFileRecordFlagsFILE_DIR != 0}
	newPath := func() string {
		return joinPath(parts[fileFilePartFILE_PART_NEW_PATH], parts[fileFilePartFILE_PART_NEW_BASE],
			fl&fileFileRecordFlagsFILE_NO_NEW_BASE == 0, fl&fileFileRecordFlagsFILE_NEW_BASE_CUT != 0)
	}
	switch {
	case r.Op == uint32(fileFileOpFILE_OP_RENAME):
		f.NewPath = newPath()
	case r.Op == uint32(fileFileOpFILE_OP_LINK) && fl&fileFileRecordFlagsFILE_SYMLINK != 0:
		// A symbolic link's target is stored as given: relative to
		// the link's directory, never the caller's.
		f.Target, f.Symlink = string(parts[fileFilePartFILE_PART_SOURCE]), true
	case r.Op == uint32(fileFileOpFILE_OP_LINK):
		f.Target = newPath()
	case op == "mount":
		f.Source = string(parts[fileFilePartFILE_PART_SOURCE])
		f.FSType = string(parts[fileFilePartFILE_PART_FSTYPE])
	}
	return f
}

// ptrace1 converts the record of a ptrace request to a process.ptrace
// event.
func (d *decoder) ptrace1(r *fileFileEvent) (*event.Event, error) {
	req, ok := ptraceRequest[r.Flags]
	if !ok {
		return nil, fmt.Errorf("%w: ptrace request %d", errDecode, r.Flags)
	}
	errno, err := resultErrno(r.Ret)
	if err != nil {
		return nil, err
	}
	e := d.envelope(event.KindPtrace, (*processEventHeader)(&r.Hdr))
	e.Proc = fileProc(r)
	e.Proc.Errno = errno
	e.Proc.Ptrace = &event.Ptrace{Request: req, TargetPid: int32(r.TargetPid)}
	return e, nil
}

// fileProc is the process of a file record.
func fileProc(r *fileFileEvent) *event.Proc {
	return &event.Proc{
		Pid:      int32(r.Hdr.Pid),
		UID:      event.U32(r.Uid),
		Comm:     cString(r.Hdr.Comm[:]),
		CgroupID: r.Hdr.CgroupId,
	}
}

// resultErrno returns the symbolic error of a syscall's result, "" for a
// success, and an error for a result below -4095 (no errno).
func resultErrno(ret int64) (string, error) {
	if ret >= 0 {
		return "", nil
	}
	if ret < -4095 {
		return "", fmt.Errorf("%w: file result %d", errDecode, ret)
	}
	return errnoName(int32(-ret)), nil
}

// joinPath makes a path passed by a caller absolute: an absolute path is
// cleaned; a relative one is joined to the walk of its base directory (the
// dirfd's or the cwd) when there is one, and kept relative otherwise.
func joinPath(user, base []byte, haveBase, baseCut bool) string {
	u := string(user)
	if strings.HasPrefix(u, "/") {
		return path.Clean(u)
	}
	if !haveBase {
		return u
	}
	b := joinCwd(base, baseCut)
	if u == "" {
		return b
	}
	if baseCut {
		return b + "/" + path.Clean(u)
	}
	return path.Join(b, u)
}
