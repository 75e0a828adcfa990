package mcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultLineLimit is the longest line a Stream keeps for parsing (64 MiB).
// A longer line is still forwarded whole, unparsed, and reported malformed;
// only a Stream that holds lines for its refusal policy drops it instead
// (it cannot read what it would let through).
const DefaultLineLimit = 64 << 20

// RefusedCode is the JSON-RPC error code of the proxy's answer to a refused
// tools/call: in the range -32000..-32099 that JSON-RPC leaves to servers.
const RefusedCode = -32001

// Stream splits one direction of a stdio MCP connection into lines and
// says which bytes to forward. It does no I/O, so it can be fuzzed.
//
// Without Refuse, a Stream streams: Feed's Forward is exactly the chunk it
// was given, and complete lines come back unparsed for the caller to Parse
// after it has written them. With Refuse, it holds each line until it is
// complete, parses it, and forwards it unless it is a tools/call of a
// refused tool: a refused request is cut out (a batch loses that element;
// a batch of only refused requests is not forwarded at all) and answered by
// a reply in Replies (one line: an error response, or for a batch an array
// of them). A held line that is not JSON-RPC is forwarded too, unless a
// lenient reading (its CR-separated pieces, scanned for structure only, so
// that NaN passes) finds a refused call in it: then it is dropped whole and
// its refused calls are answered.
type Stream struct {
	Refuse func(tool string) bool
	Limit  int // 0: DefaultLineLimit

	part []byte // the line so far, when it spans chunks
	over bool   // the line so far is longer than the limit (part is dropped)
	step Step
}

// Step is what Feed made of one chunk. Its slices are valid until the next
// call of Feed or Flush.
type Step struct {
	Forward [][]byte // to write to the peer, in order
	Replies [][]byte // to write back to the sender (refusals), each a line
	Lines   []Line   // the lines completed by the chunk, in order
}

// Line is one complete line (its newline included).
type Line struct {
	Raw  []byte // nil when Over
	Over bool   // longer than the limit
	// Dropped: not forwarded, because it was Over while Refuse was set, or
	// was malformed but held a refused call when read leniently (Err says
	// it is malformed, Msgs and Refused are the refused calls).
	Dropped bool
	// Parsed: Msgs and Err are set (a Stream with Refuse parses every line).
	Parsed  bool
	Msgs    []Message
	Err     error
	Refused []int // the indices in Msgs of the requests cut out
}

func (s *Stream) limit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	return DefaultLineLimit
}

// Feed takes the next chunk of the direction's bytes.
func (s *Stream) Feed(chunk []byte) *Step {
	s.reset()
	if s.Refuse == nil {
		s.step.Forward = append(s.step.Forward, chunk)
	}
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			s.keep(chunk)
			break
		}
		s.complete(chunk[:i+1])
		chunk = chunk[i+1:]
	}
	return &s.step
}

// Flush ends the direction: a last line without a newline is completed.
func (s *Stream) Flush() *Step {
	s.reset()
	if len(s.part) > 0 || s.over {
		s.complete(nil)
	}
	return &s.step
}

func (s *Stream) reset() {
	s.step.Forward = s.step.Forward[:0]
	s.step.Replies = s.step.Replies[:0]
	s.step.Lines = s.step.Lines[:0]
}

// keep adds the start of a line that the chunk does not finish.
func (s *Stream) keep(b []byte) {
	if s.over {
		return
	}
	if len(s.part)+len(b) > s.limit() {
		s.over, s.part = true, nil
		return
	}
	s.part = append(s.part, b...)
}

// complete finishes the line whose last piece (up to and with its
// newline) is tail.
func (s *Stream) complete(tail []byte) {
	line := tail
	if len(s.part) > 0 || s.over {
		s.keep(tail)
		line = s.part
	}
	over := s.over || len(line) > s.limit()
	s.part, s.over = nil, false
	if over {
		s.step.Lines = append(s.step.Lines, Line{Over: true, Dropped: s.Refuse != nil})
		return
	}
	if s.Refuse == nil {
		s.step.Lines = append(s.step.Lines, Line{Raw: line})
		return
	}
	s.hold(line)
}

// hold parses a complete line and forwards it, less its refused requests.
func (s *Stream) hold(line []byte) {
	l := Line{Raw: line, Parsed: true}
	l.Msgs, l.Err = Parse(line)
	if l.Err != nil {
		s.holdMalformed(line, l)
		return
	}
	refused := make([]bool, len(l.Msgs))
	for i, m := range l.Msgs {
		if s.refuses(m) {
			refused[i] = true
			l.Refused = append(l.Refused, i)
		}
	}
	start, _ := jsonText(line)
	batch := start < len(line) && line[start] == '['
	switch {
	case len(l.Refused) == 0:
		s.step.Forward = append(s.step.Forward, line)
	case len(l.Refused) < len(l.Msgs):
		s.step.Forward = append(s.step.Forward, withoutRefused(line, l.Msgs, refused))
	}
	if len(l.Refused) > 0 {
		s.step.Replies = append(s.step.Replies, refusalReply(l.Msgs, l.Refused, batch))
	}
	s.step.Lines = append(s.step.Lines, l)
}

func (s *Stream) refuses(m Message) bool { return refuses(m, s.Refuse) }

func refuses(m Message, refuse func(string) bool) bool {
	return m.Kind == Request && m.Method == "tools/call" && refuse(callName(m.Method, m.Params))
}

// lenientRefused returns the refused calls that a lenient reading of a
// malformed line finds: its CR-separated pieces, each scanned for its
// structure only.
func lenientRefused(line []byte, refuse func(string) bool) []Message {
	var refused []Message
	start, end := jsonText(line)
	for _, piece := range bytes.Split(line[start:end], []byte("\r")) {
		msgs, _ := parse(piece, false)
		for _, m := range msgs {
			if refuses(m, refuse) {
				refused = append(refused, m)
			}
		}
	}
	return refused
}

// holdMalformed forwards a line that is not JSON-RPC, unless a lenient
// reading finds a refused call in it: a server may read more than JSON
// (NaN and Infinity, as Python's parsers do) or split lines at a CR (as
// Python's universal newlines do). Such a line is dropped whole, and its
// refused calls are answered.
func (s *Stream) holdMalformed(line []byte, l Line) {
	refused := lenientRefused(line, s.Refuse)
	if len(refused) == 0 {
		s.step.Forward = append(s.step.Forward, line)
		s.step.Lines = append(s.step.Lines, l)
		return
	}
	l.Dropped, l.Msgs, l.Refused = true, refused, indices(len(refused))
	s.step.Replies = append(s.step.Replies, refusalReply(refused, l.Refused, len(refused) > 1))
	s.step.Lines = append(s.step.Lines, l)
}

// withoutRefused rebuilds a batch line without its refused elements,
// keeping what surrounds the array (its newline).
func withoutRefused(line []byte, msgs []Message, refused []bool) []byte {
	start, end := jsonText(line)
	out := append([]byte(nil), line[:start]...)
	out = append(out, '[')
	first := true
	for i, m := range msgs {
		if refused[i] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, m.Raw...)
	}
	out = append(out, ']')
	return append(out, line[end:]...)
}

// refusalReply is the error response for each refused request: one
// object, or an array for a batch.
func refusalReply(msgs []Message, refused []int, batch bool) []byte {
	var out []byte
	if batch {
		out = append(out, '[')
	}
	for i, r := range refused {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, refusalError(msgs[r])...)
	}
	if batch {
		out = append(out, ']')
	}
	return append(out, '\n')
}

// refusalError is the JSON-RPC error response to one refused request, with
// its id's raw bytes.
func refusalError(m Message) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, trimSpace(m.ID), refusalObject(callName(m.Method, m.Params)))
}

// refusalObject is the error object of the answer to a refused tool.
func refusalObject(tool string) []byte {
	msg, _ := json.Marshal(refusalMessage(tool))
	return fmt.Appendf(nil, `{"code":%d,"message":%s}`, RefusedCode, msg)
}

func refusalMessage(tool string) string { return fmt.Sprintf("tool %q refused by policy", tool) }
