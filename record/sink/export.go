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

	"github.com/sandtrail/sandtrail/record/event"
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
// messages. A checkpoint is found where a sink writes one (checkpointsIn);
// lines without one are skipped. The notes are returned as
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
		found, err := checkpointsIn(sc.Bytes())
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
// checkpointMark (the line of a file sink, an RFC 5424 message's MSG, a
// Splunk event: an agent's strings in an event are escaped there, so the
// mark stands only where a sink wrote a checkpoint), and, in the
// OpenTelemetry Collector's OTLP JSON, each log record whose whole body
// is a checkpoint line. A string elsewhere that merely holds one (an
// argv the agent chose) is not a checkpoint.
func checkpointsIn(line []byte) ([]CheckpointLine, error) {
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
	if !bytes.Contains(line, escapedCheckpointMark) {
		return out, nil
	}
	bodies, ok := otlpBodies(line)
	if !ok {
		return out, nil // a string holding the mark, in a line of no form that carries one
	}
	for _, b := range bodies {
		var l CheckpointLine
		if !strings.HasPrefix(b, string(checkpointMark)) || event.DecodeStrict([]byte(b), &l) != nil || l.Checkpoint.Note == "" {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// otlpBodies are the string bodies of the log records of line, an OTLP
// JSON export request, and false when line is not one.
func otlpBodies(line []byte) ([]string, bool) {
	var req struct {
		ResourceLogs []struct {
			ScopeLogs []struct {
				LogRecords []struct {
					Body struct {
						StringValue *string `json:"stringValue"`
					} `json:"body"`
				} `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	if json.Unmarshal(line, &req) != nil || len(req.ResourceLogs) == 0 {
		return nil, false
	}
	var out []string
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				if lr.Body.StringValue != nil {
					out = append(out, *lr.Body.StringValue)
				}
			}
		}
	}
	return out, true
}
