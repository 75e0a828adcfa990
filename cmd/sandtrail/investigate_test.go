package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sealed"
)

// sealedSession is a data dir whose journal holds one tool.invoke of
// session s1 with its I/O sealed to inv, and the identity files of inv and
// of another investigator.
func sealedSession(t *testing.T) (data, invKey, otherKey, blob string) {
	t.Helper()
	t.Setenv("SANDTRAIL_SOCKET", filepath.Join(t.TempDir(), "ingest.sock")) // no daemon
	t.Setenv("SANDTRAIL_ORIGIN", "sandtrail/test")
	t.Setenv("SANDTRAIL_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	if err := os.WriteFile(os.Getenv("SANDTRAIL_CONFIG"), []byte("log_level: error\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	dir := t.TempDir()
	invKey, otherKey = filepath.Join(dir, "inv.key"), filepath.Join(dir, "other.key")
	os.WriteFile(invKey, []byte("# investigator\n"+inv.String()+"\n"), 0o600)
	os.WriteFile(otherKey, []byte(other.String()+"\n"), 0o600)

	sealedDir := t.TempDir()
	st, err := sealed.OpenStore(sealedDir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := st.Seal([]age.Recipient{inv.Recipient()}, &sealed.Contents{Session: "s1", EventID: "e-1", Kind: event.KindToolInvoke, Name: "bash",
		Input: `{"command":"cat ~/.aws/credentials"}`, Output: "aws_secret_access_key=wJalrXUtnFEMI"})
	if err != nil {
		t.Fatal(err)
	}
	data = dataWithJournal(t, &event.Event{Kind: event.KindToolInvoke, Source: event.SourceAPI, SessionID: "s1", EventID: "e-1",
		Tool: &event.Tool{Name: "bash", Status: "ok", IO: event.IO{Verbosity: "full", SealedRef: ref}}})
	if err := os.Rename(sealedDir, filepath.Join(data, "sealed")); err != nil {
		t.Fatal(err)
	}
	return data, invKey, otherKey, filepath.Join(data, "sealed", strings.TrimPrefix(ref, "sha256:"))
}

// unseals are the investigate.unseal events of data's journal.
func unseals(t *testing.T, data string) []*event.Event {
	t.Helper()
	var out []*event.Event
	journal.Scan(filepath.Join(data, "journal"), 0, func(seq uint64, raw []byte) error {
		if e, err := event.DecodeStored(raw); err == nil && e.Kind == event.KindInvestigateUnseal {
			out = append(out, e)
		}
		return nil
	})
	return out
}

func TestUnseal(t *testing.T) {
	data, invKey, otherKey, _ := sealedSession(t)
	if code, out := runCLI(t, "--data", data, "verify"); code != exitOK || !strings.Contains(out, "sealed      1 blobs") {
		t.Fatalf("verify = %d\n%s\nwant intact, with the blob checked", code, out)
	}
	if code, out := runCLI(t, "--data", data, "investigate", "unseal", "--identity", invKey, "--session", "s1"); code != exitFailed || !strings.Contains(out, "--reason") {
		t.Errorf("unseal without a reason = %d %s, want a usage error", code, out)
	}
	if code, out := runCLI(t, "--data", data, "investigate", "unseal", "--identity", otherKey, "--session", "s1", "--reason", "r"); code != exitFailed || !strings.Contains(out, "sealed to other recipients") {
		t.Errorf("unseal with another identity = %d %s, want refused", code, out)
	}
	if n := len(unseals(t, data)); n != 0 {
		t.Fatalf("%d unseals journaled before any succeeded", n)
	}
	code, out := runCLI(t, "--data", data, "investigate", "unseal", "--identity", invKey, "--session", "s1", "--reason", "IR-2026-031", "--format", "json")
	if code != exitOK {
		t.Fatalf("unseal = %d\n%s", code, out)
	}
	var got struct {
		Seq   uint64 `json:"journaled_seq"`
		Calls []struct {
			Seq         uint64
			Name, Input string
			Output      string
			SealedRef   string `json:"sealed_ref"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Calls) != 1 || got.Calls[0].Output != "aws_secret_access_key=wJalrXUtnFEMI" || got.Calls[0].Name != "bash" {
		t.Fatalf("unseal printed %s (%v), want the whole I/O of the one call", out, err)
	}
	us := unseals(t, data)
	if len(us) != 1 || us[0].Seq != got.Seq || us[0].SessionID != "" || us[0].Source != event.SourceJournal {
		t.Fatalf("journaled unseals = %+v, want one at seq %d, of no session, source journal", us, got.Seq)
	}
	inv := us[0].Investigate
	invID, _ := os.ReadFile(invKey)
	ids, _ := sealed.ParseIdentities(strings.NewReader(string(invID)))
	if inv.Session != "s1" || inv.Reason != "IR-2026-031" || len(inv.Events) != 1 || inv.Events[0] != got.Calls[0].Seq ||
		inv.Refs[0] != got.Calls[0].SealedRef || inv.UID == nil || *inv.UID != uint32(os.Getuid()) || inv.Recipient != sealed.Recipient(ids[0]) {
		t.Errorf("the unseal journaled %+v, want who, which event, which key and why", inv)
	}
	if code, out := runCLI(t, "--data", data, "investigate", "unseal", "--identity", invKey, "--session", "s1", "--event", "99", "--reason", "r"); code != exitFailed || !strings.Contains(out, "seq 99 is not a sealed event") {
		t.Errorf("unseal of a seq that is not sealed = %d %s", code, out)
	}
}

func TestSealedBlobTampered(t *testing.T) {
	for _, damage := range []string{"flipped", "removed"} {
		t.Run(damage, func(t *testing.T) {
			data, invKey, _, blob := sealedSession(t)
			if damage == "removed" {
				os.Remove(blob)
			} else {
				b, _ := os.ReadFile(blob)
				b[len(b)/2] ^= 1
				os.WriteFile(blob, b, 0o600)
			}
			if code, out := runCLI(t, "--data", data, "verify"); code != exitTampered || !strings.Contains(out, "sealed blob") {
				t.Errorf("verify of a %s blob = %d\n%s\nwant tampered, naming the blob", damage, code, out)
			}
			if code, out := runCLI(t, "--data", data, "investigate", "unseal", "--identity", invKey, "--session", "s1", "--reason", "r"); code != exitTampered {
				t.Errorf("unseal of a %s blob = %d %s, want tampered", damage, code, out)
			}
			if n := len(unseals(t, data)); n != 0 {
				t.Errorf("%d unseals journaled of a %s blob", n, damage)
			}
		})
	}
}
