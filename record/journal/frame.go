package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
)

// A frame is one entry of a segment file:
//
//	length  uint32, little endian: the number of payload bytes (1..MaxPayload),
//	        with bit 31 (tombstoneFlag) set for a tombstone
//	crc     uint32, little endian: CRC-32C (Castagnoli) of the 4 length bytes
//	        followed by the payload
//	payload the canonical event encoding (event.Marshal), the Merkle leaf data
//
// A tombstone is what Prune leaves of an entry: its payload is exactly
// tombstoneSize bytes, the seq (uint64, little endian) and the entry's
// Merkle leaf hash (32 bytes). The flag lives in the header, which the CRC
// covers, so no entry payload, whatever its bytes, reads as a tombstone,
// and a reader that does not know tombstones sees an invalid length and
// refuses the segment rather than misreading it.
const (
	frameHeaderSize = 8
	// MaxPayload is the largest payload a frame may carry: the largest
	// canonical event encoding plus room for the sequence number.
	MaxPayload = event.MaxEncodedSize + 32

	tombstoneFlag = 1 << 31
	tombstoneSize = 8 + tlog.HashSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends the frame of payload to dst.
func appendFrame(dst, payload []byte) []byte {
	var h [frameHeaderSize]byte
	putFrameHeader(h[:], payload)
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// putFrameHeader writes the header of payload's frame into h.
func putFrameHeader(h, payload []byte) {
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	c := crc32.Update(0, castagnoli, h[0:4])
	c = crc32.Update(c, castagnoli, payload)
	binary.LittleEndian.PutUint32(h[4:8], c)
}

// appendTombstone appends the tombstone frame of entry seq, whose leaf
// hash is leaf, to dst.
func appendTombstone(dst []byte, seq uint64, leaf tlog.Hash) []byte {
	var p [tombstoneSize]byte
	binary.LittleEndian.PutUint64(p[:8], seq)
	copy(p[8:], leaf[:])
	var h [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:4], tombstoneFlag|tombstoneSize)
	c := crc32.Update(0, castagnoli, h[0:4])
	c = crc32.Update(c, castagnoli, p[:])
	binary.LittleEndian.PutUint32(h[4:8], c)
	dst = append(dst, h[:]...)
	return append(dst, p[:]...)
}

// tombstoneLeaf returns the leaf hash a tombstone payload keeps.
func tombstoneLeaf(p []byte) tlog.Hash {
	var h tlog.Hash
	copy(h[:], p[8:tombstoneSize])
	return h
}

// frameKind classifies why a frame could not be read.
type frameKind int

const (
	frameShortHeader  frameKind = iota + 1 // fewer than 8 bytes left
	frameShortPayload                      // the payload runs past the end of the file
	frameBadLength                         // length 0 or above MaxPayload
	frameBadChecksum                       // the CRC does not match
	frameBadSeq                            // the payload does not carry the expected seq
)

func (k frameKind) String() string {
	switch k {
	case frameShortHeader:
		return "incomplete frame header"
	case frameShortPayload:
		return "incomplete frame payload"
	case frameBadLength:
		return "invalid frame length"
	case frameBadChecksum:
		return "frame checksum mismatch"
	case frameBadSeq:
		return "sequence number mismatch"
	}
	return "unknown frame error"
}

// frameError describes an unreadable frame at a known place.
type frameError struct {
	kind   frameKind
	seq    uint64 // the seq the frame should hold
	offset int64  // where the frame starts in its segment
	detail string
}

func (e *frameError) Error() string {
	s := fmt.Sprintf("seq %d at offset %d: %s", e.seq, e.offset, e.kind)
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

// segmentReader reads the frames of one segment file in order, through a
// window of the file that payloads are returned from without copying.
type segmentReader struct {
	f      *os.File
	size   int64 // the file size when opened; frames beyond it are not read
	off    int64 // offset of the next frame
	seq    uint64
	buf    []byte // the window's storage
	win    []byte // file bytes from winOff
	winOff int64
	hdr    [frameHeaderSize]byte
	// checkSeq makes next compare the payload's "seq" with the position.
	checkSeq bool
	// pruned says that the frame next returned last is a tombstone; its
	// payload is then the tombstone's (see tombstoneLeaf).
	pruned bool
}

const readBufferSize = 4 << 20

func openSegmentReader(path string, first uint64) (*segmentReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening segment: %w", err)
	}
	return &segmentReader{f: f, size: st.Size(), seq: first, checkSeq: true}, nil
}

func (s *segmentReader) Close() error { return s.f.Close() }

// window returns the n file bytes at s.off, reading more of the file into
// the window when needed. The caller has checked that they exist.
func (s *segmentReader) window(n int) ([]byte, error) {
	start := int(s.off - s.winOff)
	if s.off >= s.winOff && start+n <= len(s.win) {
		return s.win[start : start+n], nil
	}
	if s.buf == nil || len(s.buf) < n {
		nb := make([]byte, max(readBufferSize, n))
		if s.off >= s.winOff && start < len(s.win) {
			copy(nb, s.win[start:])
		}
		s.buf = nb
	} else if s.off >= s.winOff && start < len(s.win) {
		copy(s.buf, s.win[start:])
	}
	have := 0
	if s.off >= s.winOff && start < len(s.win) {
		have = len(s.win) - start
	}
	want := int(min(int64(len(s.buf)), s.size-s.off))
	k, err := s.f.ReadAt(s.buf[have:want], s.off+int64(have))
	if have+k < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading segment %s: %w", s.f.Name(), err)
	}
	s.win, s.winOff = s.buf[:have+k], s.off
	return s.win[:n], nil
}

// next returns the next frame's payload, valid until the following call;
// io.EOF at a clean end; or a *frameError.
func (s *segmentReader) next() ([]byte, error) {
	remain := s.size - s.off
	if remain == 0 {
		return nil, io.EOF
	}
	if remain < frameHeaderSize {
		return nil, &frameError{kind: frameShortHeader, seq: s.seq, offset: s.off}
	}
	h, err := s.window(frameHeaderSize)
	if err != nil {
		return nil, err
	}
	copy(s.hdr[:], h)
	n := binary.LittleEndian.Uint32(s.hdr[0:4])
	pruned := n&tombstoneFlag != 0
	n &^= tombstoneFlag
	if n == 0 || n > MaxPayload || pruned && n != tombstoneSize {
		return nil, &frameError{kind: frameBadLength, seq: s.seq, offset: s.off, detail: strconv.FormatUint(uint64(n), 10)}
	}
	if int64(n) > remain-frameHeaderSize {
		return nil, &frameError{kind: frameShortPayload, seq: s.seq, offset: s.off}
	}
	fr, err := s.window(frameHeaderSize + int(n))
	if err != nil {
		return nil, err
	}
	p := fr[frameHeaderSize:]
	c := crc32.Update(0, castagnoli, s.hdr[0:4])
	c = crc32.Update(c, castagnoli, p)
	if c != binary.LittleEndian.Uint32(s.hdr[4:8]) {
		return nil, &frameError{kind: frameBadChecksum, seq: s.seq, offset: s.off}
	}
	if pruned {
		if got := binary.LittleEndian.Uint64(p[:8]); got != s.seq {
			return nil, &frameError{kind: frameBadSeq, seq: s.seq, offset: s.off, detail: "tombstone holds seq " + strconv.FormatUint(got, 10)}
		}
	} else if s.checkSeq {
		got, ok := payloadSeq(p)
		if !ok {
			return nil, &frameError{kind: frameBadSeq, seq: s.seq, offset: s.off, detail: "payload does not begin with {\"v\":N,\"seq\":N,"}
		}
		if got != s.seq {
			return nil, &frameError{kind: frameBadSeq, seq: s.seq, offset: s.off, detail: "entry holds seq " + strconv.FormatUint(got, 10)}
		}
	}
	s.off += frameHeaderSize + int64(n)
	s.seq++
	s.pruned = pruned
	return p, nil
}

// torn reports whether the unreadable frame fe, found in the last segment,
// is a torn tail: the unacknowledged end of a write that a crash (or a
// reader racing the writer) left incomplete. It is torn when the frame runs
// past the end of the file, or when it is garbled (bad length or checksum)
// and nothing but zero bytes follows the frame. A garbled frame followed by
// data is corruption in the middle, never a torn tail. The bytes from
// fe.offset to the end of the file are the tail.
func (s *segmentReader) torn(fe *frameError) (bool, error) {
	switch fe.kind {
	case frameShortHeader, frameShortPayload:
		return true, nil
	case frameBadSeq:
		return false, nil
	}
	// Garbled: what follows the frame must be zeros (or nothing).
	from := fe.offset + frameHeaderSize
	if fe.kind == frameBadChecksum {
		from += int64(binary.LittleEndian.Uint32(s.hdr[0:4]) &^ tombstoneFlag)
	}
	if from >= s.size {
		return true, nil
	}
	r := io.NewSectionReader(s.f, from, s.size-from)
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if !allZero(buf[:n]) {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading segment tail: %w", err)
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// payloadSeq reads the seq of a canonical encoding, which always begins
// {"v":N,"seq":N, because V and Seq are the first fields of event.Event.
func payloadSeq(p []byte) (uint64, bool) {
	const pv, ps = `{"v":`, `,"seq":`
	if !bytes.HasPrefix(p, []byte(pv)) {
		return 0, false
	}
	p = p[len(pv):]
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return 0, false
	}
	p = p[i:]
	if !bytes.HasPrefix(p, []byte(ps)) {
		return 0, false
	}
	p = p[len(ps):]
	var seq uint64
	i = 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		if i == 19 || (i > 0 && seq == 0) { // too long, or a leading zero
			return 0, false
		}
		d := uint64(p[i] - '0')
		if seq > (1<<64-1-d)/10 {
			return 0, false
		}
		seq = seq*10 + d
		i++
	}
	if i == 0 || i >= len(p) || p[i] != ',' {
		return 0, false
	}
	return seq, true
}

// errStop ends a scan early without an error.
var errStop = errors.New("journal: stop")
