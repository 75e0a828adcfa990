package sink

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxHeld bounds the checkpoints Checkpoints returns: the newest.
const maxHeld = 64

// maxLine bounds one line of an export.
const maxLine = 16 << 20

// Checkpoints reads a sink's export and returns the notes of the signed
// checkpoints it carries (CheckpointLine), the newest maxHeld by size,
// newest first. An export is lines of text, in the form the receiver
// stored them: the file sink's JSON lines, an rsyslog file of RFC 5424
// messages, the OpenTelemetry Collector's file of OTLP JSON (where the
// line is a string value), events exported from Splunk, a NATS stream's
// messages. A checkpoint is found in a line as an object
// {"sandtrail_checkpoint":...}, or in a JSON string value of a line that
// is JSON; lines without one are skipped. The notes are returned as
// carried, for the journal's Verify to check their signatures. The export
// is untrusted: a line too long or a checkpoint that does not decode is
// an error.
func Checkpoints(r io.Reader) ([][]byte, error) {
	type held struct {
		size uint64
		note []byte
	}
	var cps []held
	seen := map[uint64]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		found, err := checkpointsIn(sc.Bytes(), 0)
		if err != nil {
			return nil, fmt.Errorf("export line %d: %w", n, err)
		}
		for _, l := range found {
			if !seen[l.Checkpoint.Size] {
				seen[l.Checkpoint.Size] = true
				cps = append(cps, held{l.Checkpoint.Size, []byte(l.Checkpoint.Note)})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading export: %w", err)
	}
	slices.SortFunc(cps, func(a, b held) int { return cmp.Compare(b.size, a.size) })
	out := make([][]byte, 0, min(len(cps), maxHeld))
	for _, c := range cps[:min(len(cps), maxHeld)] {
		out = append(out, c.note)
	}
	return out, nil
}

// The marks of a checkpoint: as an object, and as one inside a JSON
// string.
var (
	checkpointMark        = []byte(`{"sandtrail_checkpoint"`)
	escapedCheckpointMark = []byte(`{\"sandtrail_checkpoint\"`)
)

// checkpointsIn returns the checkpoints of one line: each object at a
// checkpointMark, and, when the line is JSON holding an escaped one, those
// of its string values (depth bounds the nesting: a string's checkpoint
// is not searched for strings again).
func checkpointsIn(line []byte, depth int) ([]CheckpointLine, error) {
	var out []CheckpointLine
	for rest := line; ; {
		i := bytes.Index(rest, checkpointMark)
		if i < 0 {
			break
		}
		var l CheckpointLine
		if err := json.NewDecoder(bytes.NewReader(rest[i:])).Decode(&l); err != nil {
			return nil, fmt.Errorf("a checkpoint that does not decode: %w", err)
		}
		if l.Checkpoint.Note == "" {
			return nil, errors.New("a checkpoint with no note")
		}
		out = append(out, l)
		rest = rest[i+len(checkpointMark):]
	}
	if depth > 0 || !bytes.Contains(line, escapedCheckpointMark) {
		return out, nil
	}
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, fmt.Errorf("a line holding an escaped checkpoint is not JSON: %w", err)
	}
	var walkErr error
	walkStrings(v, func(s string) {
		if walkErr == nil && strings.Contains(s, string(checkpointMark)) {
			found, err := checkpointsIn([]byte(s), depth+1)
			out, walkErr = append(out, found...), err
		}
	})
	return out, walkErr
}

// walkStrings calls f with every string value in v, a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, x := range v {
			walkStrings(x, f)
		}
	case map[string]any:
		for _, x := range v {
			walkStrings(x, f)
		}
	}
}
