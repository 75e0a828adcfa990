package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/sink"
)

// sinkSeqs reads the seqs a JSONL sink file holds, stored events or OCSF
// ones, in order, leaving out the signed checkpoints it carries.
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
		if bytes.Contains(sc.Bytes(), []byte(`"sandtrail_checkpoint"`)) {
			continue
		}
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
// appends after the first's without sending anything twice. The files
// carry the signed checkpoints: `verify --against` the export passes on
// the journal, and fails (tampered) on the journal rolled back to its
// state after the first session, which plain verify finds intact.
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
	snapshot := filepath.Join(t.TempDir(), "journal")
	for round := range 2 {
		if round == 1 {
			if out, err := exec.Command("cp", "-a", filepath.Join(e.data, "journal"), snapshot).CombinedOutput(); err != nil {
				t.Fatalf("snapshot: %v\n%s", err, out)
			}
		}
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
	export := filepath.Join(out, "all.jsonl")
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := sink.Checkpoints(f)
	f.Close()
	if err != nil || len(cps) == 0 {
		t.Fatalf("the export's checkpoints: %d, %v; want some", len(cps), err)
	}
	if lines := strings.Split(string(cps[0]), "\n"); len(lines) < 2 || lines[1] != strconv.Itoa(len(e.events(""))) {
		t.Errorf("the export's newest checkpoint:\n%s\nwant one of the whole journal (%d entries): the daemon signs one for the sinks before they stop", cps[0], len(e.events("")))
	}
	if b, err := e.cmd("verify", "--against", export).CombinedOutput(); err != nil {
		t.Fatalf("verify --against the export: %v\n%s", err, b)
	}
	// The host rolls its journal back to before the second session.
	journalDir := filepath.Join(e.data, "journal")
	if err := os.RemoveAll(journalDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", snapshot, journalDir).CombinedOutput(); err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if b, err := e.cmd("verify").CombinedOutput(); err != nil {
		t.Fatalf("plain verify of the rolled-back journal: %v, want intact (nothing else held)\n%s", err, b)
	}
	b, err := e.cmd("verify", "--against", export).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("verify --against the export of the rolled-back journal: %v, want exit 2 (tampered)\n%s", err, b)
	}
}

// TestSinksStatus: a daemon with a file sink runs a session; `sandtrail
// status` reports the sink with no lag once the session's events are out,
// and the file holds every entry once.
func TestSinksStatus(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	out := t.TempDir()
	cfg := filepath.Join(out, "config.yaml")
	if err := os.WriteFile(cfg, []byte("sinks:\n  - name: all\n    type: file\n    path: "+filepath.Join(out, "all.jsonl")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	_, _, stop := startDNSDaemon(t, e, "")
	defer stop()
	r := e.run("--", "true")
	if r.summary.HostedBy != "daemon" {
		t.Fatalf("hosted by %q, want daemon", r.summary.HostedBy)
	}
	var sinks []struct {
		Name      string `json:"name"`
		Cursor    uint64 `json:"cursor"`
		Lag       uint64 `json:"lag"`
		LastError string `json:"last_error"`
	}
	waitFor(t, "the sink to catch up", func() bool {
		b, err := e.cmd("status", "--format", "json").Output()
		if err != nil {
			t.Fatalf("sandtrail status: %v", err)
		}
		if err := json.Unmarshal(b, &sinks); err != nil {
			t.Fatalf("status output %s: %v", b, err)
		}
		return len(sinks) == 1 && sinks[0].Cursor > 0 && sinks[0].Lag == 0
	})
	if sinks[0].Name != "all" || sinks[0].LastError != "" {
		t.Errorf("status = %+v, want sink all with no error", sinks)
	}
	seqs := sinkSeqs(t, filepath.Join(out, "all.jsonl"))
	for i, s := range seqs {
		if s != uint64(i) {
			t.Fatalf("line %d has seq %d: lost or sent twice", i, s)
		}
	}
	if uint64(len(seqs)) != sinks[0].Cursor {
		t.Errorf("file holds %d entries, cursor %d", len(seqs), sinks[0].Cursor)
	}
}
