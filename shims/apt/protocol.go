package apt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The broker's protocol, over a unix stream socket: the client sends one
// frame, a BrokerRequest, with its stdin, stdout and stderr passed as
// SCM_RIGHTS on the frame's first byte; the server answers with one frame,
// a BrokerReply, when apt-get has exited (or at once, when it refuses).
// A frame is a 4-byte big-endian length and that many bytes of JSON.

// MaxBrokerFrame bounds a frame of the broker's protocol.
const MaxBrokerFrame = 64 << 10

// BrokerRequest is the client's frame.
type BrokerRequest struct {
	// Args is apt-get's argv without argv[0].
	Args []string `json:"args"`
	// Term and Lang are the client's TERM and LANG, used when sane.
	Term string `json:"term,omitempty"`
	Lang string `json:"lang,omitempty"`
}

// BrokerReply is the server's frame.
type BrokerReply struct {
	// Exit is apt-get's exit code (100, apt's error code, for a refusal).
	Exit int `json:"exit"`
	// Refused is set when the broker ran nothing; Message says why.
	Refused bool   `json:"refused,omitempty"`
	Message string `json:"message,omitempty"`
}

// ErrFrame is wrapped by errors in the broker's framing.
var ErrFrame = errors.New("apt: bad broker frame")

// WriteFrame writes b as one frame.
func WriteFrame(w io.Writer, b []byte) error {
	if len(b) == 0 || len(b) > MaxBrokerFrame {
		return fmt.Errorf("%w: %d bytes", ErrFrame, len(b))
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	if _, err := w.Write(append(buf, b...)); err != nil {
		return fmt.Errorf("writing a broker frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	return readBody(r, hdr[:])
}

// readBody reads the rest of a frame whose first bytes (the header and
// possibly some of the body) are in have.
func readBody(r io.Reader, have []byte) ([]byte, error) {
	n := binary.BigEndian.Uint32(have[:4])
	if n == 0 || n > MaxBrokerFrame {
		return nil, fmt.Errorf("%w: length %d", ErrFrame, n)
	}
	body := make([]byte, n)
	got := copy(body, have[4:])
	if len(have)-4 > int(n) {
		return nil, fmt.Errorf("%w: trailing bytes", ErrFrame)
	}
	if _, err := io.ReadFull(r, body[got:]); err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrFrame, err)
	}
	return body, nil
}

// SplitFrame reads the rest of a frame whose first bytes the caller read
// already (with the passed fds, say): have holds at least the header.
func SplitFrame(r io.Reader, have []byte) ([]byte, error) {
	if len(have) < 4 {
		var rest [4]byte
		if _, err := io.ReadFull(r, rest[:4-len(have)]); err != nil {
			return nil, fmt.Errorf("%w: reading the header: %v", ErrFrame, err)
		}
		have = append(have, rest[:4-len(have)]...)
	}
	return readBody(r, have)
}
