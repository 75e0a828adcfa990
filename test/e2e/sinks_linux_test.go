package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// sinkSeqs reads the seqs a JSONL sink file holds, stored events or OCSF
// ones, in order.
func sinkSeqs(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uint64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e struct {
			Seq      *uint64 `json:"seq"`
			Metadata struct {
				Sequence uint64 `json:"sequence"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if e.Seq != nil {
			out = append(out, *e.Seq)
		} else {
			out = append(out, e.Metadata.Sequence)
		}
	}
	return out
}

// TestSinksFile: a session hosted by `sandtrail run` with two file sinks in
// the config, one jsonl and one ocsf: when run returns, each file holds
// every entry of the journal once, in seq order, and a second session
// appends after the first's without sending anything twice.
func TestSinksFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := t.TempDir()
	cfg := filepath.Join(out, "config.yaml")
	body := "sinks:\n  - name: all\n    type: file\n    path: " + filepath.Join(out, "all.jsonl") +
		"\n  - name: soc\n    type: file\n    format: ocsf\n    path: " + filepath.Join(out, "soc.jsonl") + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	for round := range 2 {
		r := e.run("--", "sh", "-c", "echo hi > note.txt; cat note.txt")
		if r.code != 0 {
			t.Fatalf("round %d: exit %d\n%s", round, r.code, r.stderr)
		}
		n := len(e.events(""))
		for _, name := range []string{"all.jsonl", "soc.jsonl"} {
			seqs := sinkSeqs(t, filepath.Join(out, name))
			if len(seqs) != n {
				t.Errorf("round %d: %s holds %d entries, the journal %d", round, name, len(seqs), n)
			}
			for i, s := range seqs {
				if s != uint64(i) {
					t.Fatalf("round %d: %s line %d has seq %d: lost or sent twice", round, name, i, s)
				}
			}
		}
	}
	e.verify()
}
