// Package ingest is the wire protocol of the sandtrail ingest socket and the
// client that shims and the orchestrator use to send events through it.
//
// The protocol is a stream of frames over a unix socket. A frame is a 4-byte
// big-endian length followed by that many bytes of JSON; no frame is larger
// than MaxFrame. The client sends a Request (a batch of events) and waits for
// exactly one Reply, which carries the result of every event in the batch.
// The daemon side lives in package ingest/server; see docs/ingest.md.
//
// Trust model: nothing a client says about who it is, which session it
// belongs to or where an event came from is believed. The server attributes
// each batch from the kernel's view of the peer (SO_PEERCRED, then the
// peer's cgroup) and overwrites those fields. A client only chooses what
// happened, and the record marks that as the client's own account
// (source "shim" or "api").
//
// The client keeps to the standard library, golang.org/x/sys and
// record/event, so that the shim binary stays small.
package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/sandtrail/sandtrail/record/event"
)

// ProtocolVersion is written in the "v" field of every request and reply.
const ProtocolVersion = 1

// MaxFrame is the largest frame payload either side accepts.
const MaxFrame = 1 << 20

// MaxBatch is the largest number of events in one request.
const MaxBatch = 4096

// MaxEventIDLen is the longest event_id the server accepts.
const MaxEventIDLen = 128

// Errors returned by the frame and message decoders.
var (
	ErrFrameTooLarge = errors.New("ingest: frame too large")
	ErrEmptyFrame    = errors.New("ingest: empty frame")
	ErrMalformed     = errors.New("ingest: malformed message")
)

// MaxChecks is the largest number of checks in one request.
const MaxChecks = 1024

// Request is one batch of events from a client, or one batch of checks.
type Request struct {
	V      int               `json:"v"`
	Events []json.RawMessage `json:"events,omitempty"`
	Checks []Check           `json:"checks,omitempty"`
}

// Check asks the daemon's policy whether a package may be installed,
// before the package manager runs (see docs/shims.md). It is what a shim
// parsed from the invocation: nothing is resolved yet.
type Check struct {
	// Manager is the package manager: npm, pip, cargo, apt.
	Manager string `json:"manager"`
	// Ecosystem is the purl type: npm, pypi, cargo, deb.
	Ecosystem string `json:"ecosystem"`
	// Name is the package name; empty when only Source names it.
	Name string `json:"name,omitempty"`
	// Spec is the requested spec as written; Exact the version it pins.
	Spec  string `json:"spec,omitempty"`
	Exact string `json:"exact,omitempty"`
	// Source is a direct URL, git URL or local path the request names.
	Source string `json:"source,omitempty"`
	// Registry is a registry or index the invocation names.
	Registry string `json:"registry,omitempty"`
}

// Verdict answers one Check: allow, flag or block, the rule that decided
// and why.
type Verdict struct {
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Status is the outcome for one event of a batch.
type Status string

// The statuses. StatusOK and StatusDuplicate both mean the event is in the
// journal and durable; StatusRejected is permanent (sending it again gives the
// same answer); StatusFailed is transient and the client should try again.
const (
	StatusOK        Status = "ok"
	StatusDuplicate Status = "duplicate"
	StatusRejected  Status = "rejected"
	StatusFailed    Status = "failed"
)

// Acked reports whether the event is durably in the journal.
func (s Status) Acked() bool { return s == StatusOK || s == StatusDuplicate }

// Code classifies a batch-level error in a Reply.
type Code string

// The batch-level error codes.
const (
	// CodeMalformed: the frame did not hold a valid request. Permanent.
	CodeMalformed Code = "malformed"
	// CodeOversized: the frame was larger than MaxFrame; the server closes
	// the connection after replying. Permanent.
	CodeOversized Code = "oversized"
	// CodeRefused: the peer may not send events at all. Permanent.
	CodeRefused Code = "refused"
	// CodeBusy: the server has too many connections. Transient.
	CodeBusy Code = "busy"
	// CodeUnavailable: the server is shutting down or could not attribute
	// the peer this time. Transient.
	CodeUnavailable Code = "unavailable"
)

// Transient reports whether a batch failing with c may succeed later.
func (c Code) Transient() bool { return c == CodeBusy || c == CodeUnavailable }

// Reply answers one Request. When Code is empty, Results has one entry per
// event of the request, in order.
type Reply struct {
	V       int      `json:"v"`
	Code    Code     `json:"code,omitempty"`
	Error   string   `json:"error,omitempty"`
	Results []Result `json:"results,omitempty"`
	// Verdicts answer a request's checks, one per check, in order.
	Verdicts []Verdict `json:"verdicts,omitempty"`
}

// Result is the outcome for one event. The server repeats the event's id
// only when the status is neither ok nor duplicate.
type Result struct {
	EventID string `json:"event_id,omitempty"`
	Status  Status `json:"status"`
	Error   string `json:"error,omitempty"`
}

// WriteFrame writes payload as one frame.
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) == 0 {
		return ErrEmptyFrame
	}
	if len(payload) > MaxFrame {
		return fmt.Errorf("%w: %d bytes exceeds %d", ErrFrameTooLarge, len(payload), MaxFrame)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	// One writev on a connection, without copying the payload.
	bufs := net.Buffers{hdr[:], payload}
	if _, err := bufs.WriteTo(w); err != nil {
		return fmt.Errorf("writing frame: %w", err)
	}
	return nil
}

// ReadFrameHeader reads a frame's length prefix and checks it against max.
// It returns the length even when it wraps ErrFrameTooLarge, so that a server
// can say how large the frame was.
func ReadFrameHeader(r io.Reader, max int) (int, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return 0, ErrEmptyFrame
	}
	if uint64(n) > uint64(max) {
		return int(n), fmt.Errorf("%w: %d bytes exceeds %d", ErrFrameTooLarge, n, max)
	}
	return int(n), nil
}

// ReadFrame reads one frame of at most max bytes. io.EOF means the stream
// ended cleanly between frames.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	n, err := ReadFrameHeader(r, max)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading frame body: %w", err)
	}
	return buf, nil
}

// DecodeRequest parses an untrusted frame payload into a Request. It checks
// the version and the batch size; the events themselves are decoded one by one
// with DecodeEvent so that one bad event does not spoil the batch. Errors wrap
// ErrMalformed.
func DecodeRequest(b []byte) (*Request, error) {
	var req Request
	if err := event.DecodeStrict(b, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if req.V != ProtocolVersion {
		return nil, fmt.Errorf("%w: unsupported protocol version %d (want %d)", ErrMalformed, req.V, ProtocolVersion)
	}
	switch {
	case req.Checks != nil && req.Events != nil:
		return nil, fmt.Errorf("%w: a request has events or checks, not both", ErrMalformed)
	case req.Checks != nil:
		if len(req.Checks) == 0 || len(req.Checks) > MaxChecks {
			return nil, fmt.Errorf("%w: %d checks: want 1 to %d", ErrMalformed, len(req.Checks), MaxChecks)
		}
		return &req, nil
	case len(req.Events) == 0:
		return nil, fmt.Errorf("%w: no events", ErrMalformed)
	}
	if len(req.Events) > MaxBatch {
		return nil, fmt.Errorf("%w: %d events exceeds %d", ErrMalformed, len(req.Events), MaxBatch)
	}
	return &req, nil
}

// Batch is a decoded request: for each event of the request, in order,
// either the decoded event or the error that kept it from decoding, and the
// bytes it took in the request.
type Batch struct {
	Events []*event.Event
	Errs   []error
	Sizes  []int
	// Checks are a check request's checks; such a request has no events.
	Checks []Check
}

// Len returns the number of events in the batch.
func (b *Batch) Len() int { return len(b.Events) }

// DecodeBatch parses an untrusted request payload in one pass, decoding each
// event strictly (unknown fields are errors) but not validating it. An
// event that does not decode, or is larger than event.MaxEncodedSize, gets
// an error wrapping event.ErrInvalid in Errs and a nil Event, and the rest of
// the batch still decodes. Anything wrong with the request itself (bad JSON,
// unknown or repeated keys, wrong version, no events, more than MaxBatch)
// is an error wrapping ErrMalformed.
func DecodeBatch(b []byte) (*Batch, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, malformed("request is not a JSON object")
	}
	var (
		batch          Batch
		v              int
		haveV, haveEvs bool
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, malformed("%v", err)
		}
		switch t {
		case "v":
			if haveV {
				return nil, malformed("repeated key v")
			}
			haveV = true
			if err := dec.Decode(&v); err != nil {
				return nil, malformed("v: %v", err)
			}
		case "events":
			if haveEvs {
				return nil, malformed("repeated key events")
			}
			haveEvs = true
			if err := batch.decodeEvents(dec, malformed); err != nil {
				return nil, err
			}
		case "checks":
			if batch.Checks != nil {
				return nil, malformed("repeated key checks")
			}
			if err := dec.Decode(&batch.Checks); err != nil {
				return nil, malformed("checks: %v", err)
			}
			if batch.Checks == nil {
				batch.Checks = []Check{}
			}
		default:
			return nil, malformed("unknown key %v", t)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, malformed("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("trailing data")
	}
	if v != ProtocolVersion {
		return nil, malformed("unsupported protocol version %d (want %d)", v, ProtocolVersion)
	}
	switch {
	case batch.Checks != nil && haveEvs:
		return nil, malformed("a request has events or checks, not both")
	case batch.Checks != nil:
		if len(batch.Checks) == 0 || len(batch.Checks) > MaxChecks {
			return nil, malformed("%d checks: want 1 to %d", len(batch.Checks), MaxChecks)
		}
	case batch.Len() == 0:
		return nil, malformed("no events")
	}
	return &batch, nil
}

// decodeEvents decodes the events array at dec's position into b, each
// event on its own (see DecodeBatch).
func (b *Batch) decodeEvents(dec *json.Decoder, malformed func(string, ...any) error) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return malformed("events is not an array")
	}
	for dec.More() {
		if b.Len() == MaxBatch {
			return malformed("more than %d events", MaxBatch)
		}
		start := dec.InputOffset()
		e := new(event.Event)
		err := dec.Decode(e)
		size := int(dec.InputOffset() - start)
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return malformed("event %d: %v", b.Len(), err)
		}
		switch {
		case err != nil:
			e, err = nil, fmt.Errorf("%w: decoding: %v", event.ErrInvalid, err)
		case size > event.MaxEncodedSize:
			e, err = nil, fmt.Errorf("%w: %d bytes exceeds %d", event.ErrInvalid, size, event.MaxEncodedSize)
		}
		b.Events = append(b.Events, e)
		b.Errs = append(b.Errs, err)
		b.Sizes = append(b.Sizes, size)
	}
	if _, err := dec.Token(); err != nil {
		return malformed("events: %v", err)
	}
	return nil
}

// DecodeEvent parses one untrusted event of a request. Unknown fields,
// trailing data and oversized events are errors wrapping event.ErrInvalid.
// It does not run Validate: the server first overwrites the fields it
// attributes itself (session_id, source, proc), then validates.
func DecodeEvent(raw []byte) (*event.Event, error) {
	if len(raw) > event.MaxEncodedSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", event.ErrInvalid, len(raw), event.MaxEncodedSize)
	}
	var e event.Event
	if err := event.DecodeStrict(raw, &e); err != nil {
		return nil, fmt.Errorf("%w: decoding: %v", event.ErrInvalid, err)
	}
	return &e, nil
}

// EncodeRequest builds a request frame payload from events.
func EncodeRequest(evs []*event.Event) ([]byte, error) {
	raws := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		b, err := event.Marshal(e)
		if err != nil {
			return nil, err
		}
		raws[i] = b
	}
	b := encodeRequest(raws)
	if len(b) > MaxFrame {
		return nil, fmt.Errorf("%w: request of %d events is %d bytes", ErrFrameTooLarge, len(evs), len(b))
	}
	return b, nil
}

// requestOverhead is the size of a request without its events' bytes
// and commas.
const requestOverhead = len(`{"v":1,"events":[]}`)

// encodeRequest joins already encoded events into a request payload,
// without a second pass over their bytes.
func encodeRequest(raws []json.RawMessage) []byte {
	n := requestOverhead + len(raws)
	for _, r := range raws {
		n += len(r)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":1,"events":[`...)
	for i, r := range raws {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r...)
	}
	return append(b, "]}"...)
}

// DecodeReply parses a reply frame payload. Errors wrap ErrMalformed.
func DecodeReply(b []byte) (*Reply, error) {
	var r Reply
	if err := event.DecodeStrict(b, &r); err != nil {
		return nil, fmt.Errorf("%w: reply: %v", ErrMalformed, err)
	}
	if r.V != ProtocolVersion {
		return nil, fmt.Errorf("%w: reply: unsupported protocol version %d", ErrMalformed, r.V)
	}
	return &r, nil
}

// ValidEventID reports whether id is an acceptable event_id: 1 to
// MaxEventIDLen bytes of letters, digits and "-_.:".
func ValidEventID(id string) bool {
	if id == "" || len(id) > MaxEventIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}
