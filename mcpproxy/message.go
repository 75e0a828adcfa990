package mcpproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Kind is what a JSON-RPC message is.
type Kind uint8

// The kinds of message.
const (
	// Invalid is valid JSON that is not a JSON-RPC message (Message.Err says why).
	Invalid Kind = iota
	// Request has a method and an id.
	Request
	// Notification has a method and no id.
	Notification
	// Response has an id and a result or an error, and no method.
	Response
)

// Message is one JSON-RPC message of a line: the line's object, or one
// element of its batch. Its byte slices point into the line.
type Message struct {
	Kind   Kind
	Raw    []byte // the message's own bytes (the batch element)
	ID     []byte // the raw id, as sent; nil when absent
	Method string
	Params []byte
	Result []byte
	Error  []byte
	Err    string // for Invalid: why
}

// ValidateMax is the longest line that Parse checks with json.Valid. Longer
// lines (MCP results can be many megabytes) are only scanned for their
// structure: exact for valid JSON, and a line the peer could not parse
// either can do no harm.
const ValidateMax = 1 << 20

var errNotJSON = errors.New("not JSON")

// Parse reads one line (or one HTTP body) as JSON-RPC: an object, or a
// batch (an array of them). A line of only whitespace has no message and
// no error. It returns an error when the line is not JSON, or is JSON but
// neither an object nor an array. Elements that are not messages come back
// as Kind Invalid. Keys are decoded as the peer's JSON parser would: escapes
// resolved, and the last of duplicate keys wins.
func Parse(line []byte) ([]Message, error) {
	return parse(line, len(line) <= ValidateMax)
}

func parse(line []byte, validate bool) ([]Message, error) {
	start, end := jsonText(line)
	b := line[start:end]
	if len(b) == 0 {
		return nil, nil
	}
	if validate && !json.Valid(b) {
		return nil, errNotJSON
	}
	switch b[0] {
	case '{':
		if end := skipValue(b, 0); end != len(b) {
			return nil, errNotJSON
		}
		return []Message{message(b)}, nil
	case '[':
		var msgs []Message
		ok := elements(b, func(el []byte) { msgs = append(msgs, message(el)) })
		if !ok {
			return nil, errNotJSON
		}
		if len(msgs) == 0 {
			return nil, errors.New("empty batch")
		}
		return msgs, nil
	}
	return nil, errors.New("neither an object nor a batch")
}

// message reads one element of a line.
func message(raw []byte) Message {
	m := Message{Raw: raw}
	if len(raw) == 0 || raw[0] != '{' {
		m.Err = "batch element is not an object"
		return m
	}
	var method []byte
	hasMethod := false
	members(raw, func(key, val []byte) {
		switch string(key) {
		case "id":
			m.ID = val
		case "method":
			method, hasMethod = val, true
		case "params":
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			m.Error = val
		}
	})
	switch {
	case hasMethod:
		s, ok := jsonString(method)
		if !ok {
			m.Err = "method is not a string"
			return m
		}
		m.Method = s
		m.Kind = Notification
		if m.ID != nil {
			m.Kind = Request
		}
	case m.ID != nil && (m.Result != nil || m.Error != nil):
		m.Kind = Response
	default:
		m.Err = "neither a request, a notification nor a response"
	}
	return m
}

// idKey is the key under which a request waits for its response: a string
// id decoded, a number in one spelling. Null and other ids are "" (not
// correlated).
func idKey(id []byte) string {
	id = trimSpace(id)
	if len(id) == 0 {
		return ""
	}
	switch c := id[0]; {
	case c == '"':
		s, ok := jsonString(id)
		if !ok {
			return ""
		}
		return "s" + s
	case c == '-' || c >= '0' && c <= '9':
		if bytes.ContainsAny(id, ".eE") {
			f, err := strconv.ParseFloat(string(id), 64)
			if err != nil {
				return ""
			}
			return "n" + strconv.FormatFloat(f, 'g', -1, 64)
		}
		return "n" + string(id)
	}
	return ""
}

// jsonString decodes a JSON string value.
func jsonString(raw []byte) (string, bool) {
	raw = trimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// members calls fn with each key (decoded) and raw value of the JSON
// object obj, in order. It reports false when obj is not an object.
func members(obj []byte, fn func(key, val []byte)) bool {
	obj = trimSpace(obj)
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return false
		}
		kend := skipString(obj, i)
		if kend < 0 {
			return false
		}
		key := obj[i+1 : kend-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			s, ok := jsonString(obj[i:kend])
			if !ok {
				return false
			}
			key = []byte(s)
		}
		i = skipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		vstart := skipSpace(obj, i+1)
		vend := skipValue(obj, vstart)
		if vend < 0 {
			return false
		}
		fn(key, obj[vstart:vend])
		i = skipSpace(obj, vend)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(obj, i+1)
		default:
			return false
		}
	}
	return false
}

// elements calls fn with each raw element of the JSON array arr. It
// reports false when arr is not a well-formed array.
func elements(arr []byte, fn func(el []byte)) bool {
	if len(arr) == 0 || arr[0] != '[' {
		return false
	}
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return i+1 == len(arr)
	}
	for i < len(arr) {
		end := skipValue(arr, i)
		if end < 0 {
			return false
		}
		fn(arr[i:end])
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ']':
			return i+1 == len(arr)
		case ',':
			i = skipSpace(arr, i+1)
		default:
			return false
		}
	}
	return false
}

// skipValue returns the index just past the JSON value that starts at
// b[i], or -1. It checks structure (balanced brackets, closed strings),
// not the grammar of numbers and literals: json.Valid does that.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	case '}', ']', ',', ':':
		return -1
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	return j
}

// skipNested skips the object or array that starts at b[i].
func skipNested(b []byte, i int) int {
	stack := make([]byte, 0, 16)
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			end := skipString(b, j)
			if end < 0 {
				return -1
			}
			j = end - 1
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c-2 {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// skipString returns the index just past the string that starts at b[i]
// (a '"'), or -1 when it is not closed.
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\r', '\n', '"', '{', '[':
		return true
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// utf8BOM is skipped before a message: decoders such as TextDecoder drop
// it, so a peer may read past it.
var utf8BOM = []byte("\xef\xbb\xbf")

// jsonText returns where the JSON text of a line starts and ends: after
// leading whitespace and a byte-order mark, before trailing whitespace.
func jsonText(line []byte) (start, end int) {
	start = skipSpace(line, 0)
	if bytes.HasPrefix(line[start:], utf8BOM) {
		start = skipSpace(line, start+len(utf8BOM))
	}
	end = len(line)
	for end > start && isSpace(line[end-1]) {
		end--
	}
	return start, end
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}
