package mcpproxy

import "bytes"

// SSE splits a text/event-stream into its events' data, as the
// server-sent-events standard reads it: lines end with CRLF, LF or CR; a
// "data" field's value (less one leading space) is appended to the event's
// data, lines joined with LF; a blank line ends the event; other fields and
// comments are skipped. It does no I/O, so it can be fuzzed.
type SSE struct {
	Limit int // the most bytes of one line or one event's data kept; 0: DefaultLineLimit

	line    []byte
	lover   bool // the current line is longer than the limit
	data    []byte
	dover   bool // the current event's data is longer than the limit
	hasData bool
	afterCR bool // the last byte was a CR: an LF right after it ends nothing
	events  []Event
}

// Event is the data of one event. Data is valid until the next Feed.
type Event struct {
	Data []byte
	Over bool // longer than the limit; Data is nil
}

func (s *SSE) limit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	return DefaultLineLimit
}

// Feed takes the next chunk of the stream and returns the events it ended.
func (s *SSE) Feed(chunk []byte) []Event {
	s.events = s.events[:0]
	for len(chunk) > 0 {
		if s.afterCR && chunk[0] == '\n' {
			chunk = chunk[1:]
		}
		s.afterCR = false
		i := bytes.IndexAny(chunk, "\r\n")
		if i < 0 {
			s.addLine(chunk)
			break
		}
		s.addLine(chunk[:i])
		s.afterCR = chunk[i] == '\r'
		s.endLine()
		chunk = chunk[i+1:]
	}
	return s.events
}

func (s *SSE) addLine(b []byte) {
	if s.lover {
		return
	}
	if len(s.line)+len(b) > s.limit() {
		s.lover, s.line = true, nil
		return
	}
	s.line = append(s.line, b...)
}

func (s *SSE) endLine() {
	line, over := s.line, s.lover
	s.line, s.lover = s.line[:0], false
	switch {
	case over:
		s.hasData, s.dover = true, true
	case len(line) == 0:
		s.dispatch()
	default:
		field, value, found := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			return
		}
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		s.addData(value)
	}
}

func (s *SSE) addData(value []byte) {
	if s.hasData && !s.dover {
		s.data = append(s.data, '\n')
	}
	s.hasData = true
	if s.dover {
		return
	}
	if len(s.data)+len(value) > s.limit() {
		s.dover, s.data = true, nil
		return
	}
	s.data = append(s.data, value...)
}

func (s *SSE) dispatch() {
	if !s.hasData {
		return
	}
	ev := Event{Over: s.dover}
	if !s.dover {
		ev.Data = s.data
	}
	s.events = append(s.events, ev)
	s.data, s.dover, s.hasData = nil, false, false
}
