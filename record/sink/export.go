package sink

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// maxHeld bounds the checkpoints Checkpoints returns: the newest.
const maxHeld = 64

// maxLine bounds one line of an export.
const maxLine = 16 << 20

// Checkpoints reads a sink's export (JSON lines, in any format) and
// returns the notes of the signed checkpoints it carries
// (CheckpointLine), the newest maxHeld by size, newest first. Lines that
// are not checkpoints are skipped; the notes are returned as carried, for
// the journal's Verify to check their signatures. The export is untrusted:
// a line too long or a checkpoint line that does not decode is an error.
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
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"sandtrail_checkpoint"`)) {
			continue
		}
		var l CheckpointLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("export line %d: %w", n, err)
		}
		if l.Checkpoint.Note == "" {
			return nil, fmt.Errorf("export line %d: a checkpoint with no note", n)
		}
		if !seen[l.Checkpoint.Size] {
			seen[l.Checkpoint.Size] = true
			cps = append(cps, held{l.Checkpoint.Size, []byte(l.Checkpoint.Note)})
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
