package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/sandtrail/sandtrail/record/archive"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// archiveFixture makes a data dir with keys and a closed journal of two
// interleaved sessions, s1 and s2, of n tool.invoke events each.
func archiveFixture(t *testing.T, n int) string {
	t.Helper()
	var evs []*event.Event
	for i := range 2 * n {
		evs = append(evs, &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: []string{"s1", "s2"}[i%2], Tool: &event.Tool{Name: "bash"}})
	}
	return dataWithJournal(t, evs...)
}

// TestArchiveCLI pushes, lists, pulls and verifies bundles through a
// directory and through a real registry on loopback, and checks the exit
// codes of what fails.
func TestArchiveCLI(t *testing.T) {
	data := archiveFixture(t, 6)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	stores := map[string]string{
		"dir": filepath.Join(t.TempDir(), "archive"),
		"oci": "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/sandtrail/archive",
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			cli := func(want int, args ...string) string {
				t.Helper()
				code, out := runCLI(t, append([]string{"--data", data, "archive"}, args...)...)
				if code != want {
					t.Fatalf("sandtrail archive %v = exit %d, want %d\n%s", args, code, want, out)
				}
				return out
			}
			var pushed []archive.Stored
			decode(t, cli(exitOK, "push", "s1", "s2", "--to", store, "--format", "json"), &pushed)
			if len(pushed) != 2 || pushed[0].SessionID != "s1" || pushed[1].CheckpointSize != 12 {
				t.Fatalf("push --format json = %+v, want s1 and s2 at checkpoint size 12", pushed)
			}
			var listed []archive.Stored
			decode(t, cli(exitOK, "list", "--from", store, "--format", "json"), &listed)
			if len(listed) != 2 || listed[1].Digest != pushed[1].Digest {
				t.Errorf("list --format json = %+v, want the pushed %+v", listed, pushed)
			}
			if out := cli(exitOK, "list", "--from", store); !strings.Contains(out, "s2") || !strings.HasPrefix(out, "SESSION") {
				t.Errorf("list = %q, want a table with s2", out)
			}
			file := filepath.Join(t.TempDir(), "s1.bundle.tar.gz")
			if out := cli(exitOK, "pull", "s1", "--from", store, "--out", file); !strings.Contains(out, "verified") {
				t.Errorf("pull = %q, want it to say verified", out)
			}
			if out := cli(exitOK, "verify", file, "--live"); !strings.Contains(out, "live") || !strings.Contains(out, "6 stored leaf hashes match") {
				t.Errorf("verify --live = %q, want the live comparison", out)
			}
			var rep struct {
				Status string `json:"status"`
				archive.Report
			}
			decode(t, cli(exitOK, "verify", "s2", "--from", store, "--live", "--format", "json"), &rep)
			if rep.Status != "verified" || rep.SessionID != "s2" || rep.Entries != 6 || rep.Live == nil {
				t.Errorf("verify s2 --from --live --format json = %+v", rep)
			}
			_, digest, _ := strings.Cut(pushed[1].Location, "@")
			if name == "dir" {
				digest = pushed[1].Digest
			}
			cli(exitOK, "pull", digest, "--from", store, "--out", filepath.Join(t.TempDir(), "by-digest"))
			cli(exitFailed, "pull", "s9", "--from", store, "--out", filepath.Join(t.TempDir(), "none"))
			cli(exitFailed, "push", "s9", "--to", store)
			if out := cli(exitOK, "push", "s1", "--to", store); !strings.HasPrefix(out, "kept s1") {
				t.Errorf("push s1 again = %q, want the stored bundle kept", out)
			}
		})
	}
}

// TestArchiveCLIFailures: tampered bundles exit 2, as sandtrail verify
// does, and usage errors 1.
func TestArchiveCLIFailures(t *testing.T) {
	data := archiveFixture(t, 4)
	dir := filepath.Join(t.TempDir(), "archive")
	if code, out := runCLI(t, "--data", data, "archive", "push", "s1", "--to", dir); code != exitOK {
		t.Fatalf("push = %d\n%s", code, out)
	}
	file := filepath.Join(dir, archive.FileName("s1"))
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := runCLI(t, "keys", "generate", "--out", filepath.Join(data, "other"), "--name", "sandtrail/test"); code != 0 {
		t.Fatal("keys generate --out failed")
	}
	other := filepath.Join(data, "other", "checkpoint.pub")
	flipped := flipContent(t, good)
	tests := []struct {
		name   string
		bundle []byte
		args   []string
		want   int
	}{
		{"intact", good, nil, exitOK},
		{"flipped byte", flipped, nil, exitTampered},
		{"another key", good, []string{"--key", other}, exitTampered},
		{"not a bundle", []byte("hello"), nil, exitTampered},
		{"bad format", good, []string{"--format", "xml"}, exitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "b.bundle.tar.gz")
			if err := os.WriteFile(f, tt.bundle, 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--data", data, "archive", "verify", f}, tt.args...)
			if code, out := runCLI(t, args...); code != tt.want {
				t.Errorf("archive verify %v = exit %d, want %d\n%s", tt.args, code, tt.want, out)
			}
		})
	}
	checks := []struct {
		name string
		args []string
		want int
	}{
		{"missing file", []string{"verify", filepath.Join(dir, "none")}, exitFailed},
		{"push without --to", []string{"push", "s1"}, exitFailed},
		{"push another key", []string{"push", "s1", "--to", dir, "--key", other}, exitTampered},
		{"pull without a session", []string{"pull", "--from", dir}, exitFailed},
		{"list ambiguous store", []string{"list", "--from", "sandtrail/archive"}, exitFailed},
	}
	for _, tt := range checks {
		t.Run(tt.name, func(t *testing.T) {
			if code, out := runCLI(t, append([]string{"--data", data, "archive"}, tt.args...)...); code != tt.want {
				t.Errorf("archive %v = exit %d, want %d\n%s", tt.args, code, tt.want, out)
			}
		})
	}
}

// TestArchivePushUncovered: a session whose last entries no checkpoint
// covers yet is not archived, and push says why.
func TestArchivePushUncovered(t *testing.T) {
	data := archiveFixture(t, 2)
	s, err := journal.LoadSigner(filepath.Join(data, "keys", "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(data, "journal"), s, journal.WithCheckpointInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(context.Background(), &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: "s2", Tool: &event.Tool{Name: "sh"}}); err != nil {
		t.Fatal(err)
	}
	code, _ := runCLI(t, "--data", data, "archive", "push", "s1", "s2", "--to", filepath.Join(t.TempDir(), "a"))
	if code != exitFailed {
		t.Errorf("push s1 s2 (s2 uncovered) = exit %d, want %d", code, exitFailed)
	}
}

func decode(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
}

// flipContent returns bundle with one bit flipped, from its middle on, in
// the first byte where the flip changes what the gzip stream decodes to
// (deflate can say the same thing in other bits, and such a flip is the
// same bundle: record/archive's TestTamperedBundleBytes).
func flipContent(t *testing.T, bundle []byte) []byte {
	t.Helper()
	plain := gunzipped(bundle)
	for i := len(bundle) / 2; i < len(bundle); i++ {
		flipped := append([]byte(nil), bundle...)
		flipped[i] ^= 0x40
		if !bytes.Equal(gunzipped(flipped), plain) {
			return flipped
		}
	}
	t.Fatal("no flip changes the bundle's content")
	return nil
}

// gunzipped is what a gzip stream decodes to, as far as it decodes.
func gunzipped(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(zr)
	return out
}
