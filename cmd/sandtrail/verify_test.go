package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// runCLI runs the sandtrail root command and returns its exit code and
// standard output.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		// What main would print on stderr, after the output.
		out.WriteString("\nsandtrail: " + err.Error() + "\n")
	}
	return code, out.String()
}

// journalFixture makes a data dir with keys and a closed journal of n
// tool.invoke events.
func journalFixture(t *testing.T, n int) string {
	t.Helper()
	var evs []*event.Event
	for i := range n {
		evs = append(evs, &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: "s1", Tool: &event.Tool{Name: "bash", IO: event.IO{InputSummary: strings.Repeat("x", i)}}})
	}
	return dataWithJournal(t, evs...)
}

// dataWithJournal makes a data dir with keys (sandtrail keys generate)
// and a closed journal of evs.
func dataWithJournal(t *testing.T, evs ...*event.Event) string {
	t.Helper()
	data := t.TempDir()
	if code, out := runCLI(t, "--data", data, "keys", "generate", "--name", "sandtrail/test"); code != 0 {
		t.Fatalf("keys generate = %d, %s", code, out)
	}
	s, err := journal.LoadSigner(filepath.Join(data, "keys", "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(data, "journal"), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestVerifyTamperExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, data string)
		args   []string
		want   int
	}{
		{"intact", nil, nil, exitOK},
		{"flipped byte", func(t *testing.T, data string) {
			p := filepath.Join(data, "journal", "seg-000000000000.log")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o600)
		}, nil, exitTampered},
		{"uncovered tail", func(t *testing.T, data string) {
			// Drop the newest checkpoint: the last entries are uncovered.
			dir := filepath.Join(data, "journal", "checkpoints")
			os.Remove(filepath.Join(dir, "000000000010"))
			os.Remove(filepath.Join(dir, "latest"))
		}, nil, exitUncovered},
		{"wrong key", func(t *testing.T, data string) {
			code, _ := runCLI(t, "keys", "generate", "--out", filepath.Join(data, "other"), "--name", "sandtrail/test")
			if code != 0 {
				t.Fatal("keys generate --out failed")
			}
		}, []string{"--key", "other/checkpoint.pub"}, exitTampered},
		{"missing key file", nil, []string{"--key", "nonexistent.pub"}, exitFailed},
		{"bad flag", nil, []string{"--no-such-flag"}, exitFailed},
		{"bad format", nil, []string{"--format", "xml"}, exitFailed},
		{"extra argument", nil, []string{"now"}, exitFailed},
		{"held checkpoint", nil, []string{"--checkpoint", "journal/checkpoints/latest"}, exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := journalFixture(t, 10)
			if tt.damage != nil {
				tt.damage(t, data)
			}
			args := []string{"--data", data, "verify"}
			for _, a := range tt.args {
				if strings.HasSuffix(a, ".pub") || strings.HasPrefix(a, "journal/") {
					a = filepath.Join(data, a)
				}
				args = append(args, a)
			}
			code, out := runCLI(t, args...)
			if code != tt.want {
				t.Fatalf("sandtrail verify %v = exit %d, want %d\n%s", tt.args, code, tt.want, out)
			}
		})
	}
}

func TestVerifyJSON(t *testing.T) {
	data := journalFixture(t, 7)
	code, out := runCLI(t, "--data", data, "verify", "--format", "json")
	if code != 0 {
		t.Fatalf("verify --format json = exit %d\n%s", code, out)
	}
	var rep struct {
		Status  string `json:"status"`
		Entries uint64 `json:"entries"`
		Covered uint64 `json:"covered"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --format json output %q: %v", out, err)
	}
	if rep.Status != "intact" || rep.Entries != 7 || rep.Covered != 7 {
		t.Fatalf("verify --format json = %+v, want intact 7/7", rep)
	}
}

func TestProveCmdAndTamperedEntry(t *testing.T) {
	data := journalFixture(t, 9)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"first", []string{"0"}, exitOK},
		{"last json", []string{"8", "--format", "json"}, exitOK},
		{"not covered", []string{"9"}, exitFailed},
		{"not a number", []string{"-1"}, exitFailed},
		{"no seq", nil, exitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runCLI(t, append([]string{"--data", data, "prove"}, tt.args...)...)
			if code != tt.want {
				t.Fatalf("sandtrail prove %v = exit %d, want %d\n%s", tt.args, code, tt.want, out)
			}
			if code == 0 && !strings.Contains(out, "verified") {
				t.Fatalf("sandtrail prove %v printed %q, want the verified line", tt.args, out)
			}
		})
	}
	// A tampered entry is exit 2.
	p := filepath.Join(data, "journal", "seg-000000000000.log")
	b, _ := os.ReadFile(p)
	b[len(b)-5] ^= 1
	os.WriteFile(p, b, 0o600)
	if code, out := runCLI(t, "--data", data, "prove", "8"); code != exitTampered {
		t.Fatalf("prove on a tampered entry = exit %d, want %d\n%s", code, exitTampered, out)
	}
}

func TestKeysCmd(t *testing.T) {
	data := t.TempDir()
	code, pub := runCLI(t, "--data", data, "keys", "generate")
	if code != 0 || !strings.Contains(pub, "+") {
		t.Fatalf("keys generate = %d, %q", code, pub)
	}
	st, err := os.Stat(filepath.Join(data, "keys", "checkpoint.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint.key mode = %v, %v, want 0600", st.Mode().Perm(), err)
	}
	if code, _ := runCLI(t, "--data", data, "keys", "generate"); code == 0 {
		t.Fatal("second keys generate succeeded, want a refusal to overwrite")
	}
	code, shown := runCLI(t, "--data", data, "keys", "show")
	if code != 0 || shown != pub {
		t.Fatalf("keys show = %d, %q, want %q", code, shown, pub)
	}
	// A .pub that does not match the signer key is an error.
	os.Remove(filepath.Join(data, "keys", "checkpoint.pub"))
	if code, _ := runCLI(t, "keys", "generate", "--out", filepath.Join(data, "x")); code != 0 {
		t.Fatal("keys generate --out failed")
	}
	other, _ := os.ReadFile(filepath.Join(data, "x", "checkpoint.pub"))
	os.WriteFile(filepath.Join(data, "keys", "checkpoint.pub"), other, 0o644)
	if code, _ := runCLI(t, "--data", data, "keys", "show"); code == 0 {
		t.Fatal("keys show with a mismatched .pub succeeded")
	}
}
