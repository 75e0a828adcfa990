package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/sealed"
)

func toolIOPolicy(t *testing.T, yaml string) *policies.Engine {
	t.Helper()
	p, err := policies.Parse("tool_io.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	e, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestToolIOLevels checks each verbosity as the policy sets it per tool:
// names keeps nothing of the I/O, summaries redacted summaries with the
// lengths and hashes, full the same and a blob that only the recipient's
// identity opens.
func TestToolIOLevels(t *testing.T) {
	inv, other := must(age.GenerateX25519Identity()), must(age.GenerateX25519Identity())
	pol := toolIOPolicy(t, `tool_io:
  verbosity: names
  recipients: [`+inv.Recipient().String()+`]
  tools:
    - {match: "read_*", verbosity: summaries}
    - {match: bash, verbosity: full}
`)
	tio, err := newToolIO(pol, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := `{"command":"curl -H 'Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789' https://x"}`
	out := "ok"
	call := func(name string, in, out *string, claimed string) *event.Event {
		e := &event.Event{SessionID: "s1", EventID: "e-" + name, Kind: event.KindToolInvoke,
			Tool: &event.Tool{Name: name, IO: event.IO{InputSummary: claimed, SealedRef: "sha256:forged"}}}
		if w := tio.keep(e, in, out); w != "" {
			t.Errorf("%s: warning %q", name, w)
		}
		return e
	}
	sum := sha256.Sum256([]byte(in))

	if e := call("write_file", &in, &out, "claimed"); e.Tool.IO != (event.IO{Verbosity: "names"}) {
		t.Errorf("names: kept %+v, want only the verbosity", e.Tool.IO)
	}
	e := call("read_file", &in, &out, "")
	if io := e.Tool.IO; io.Verbosity != "summaries" || io.InputBytes != int64(len(in)) || io.InputSHA256 != hex.EncodeToString(sum[:]) ||
		io.SealedRef != "" || strings.Contains(io.InputSummary, "ghp_abcdef") || !strings.Contains(io.InputSummary, "curl") || io.OutputSummary != "ok" {
		t.Errorf("summaries: kept %+v, want redacted summaries, length and sha256, no blob", io)
	}
	e = call("bash", &in, &out, "")
	if e.Tool.Verbosity != "full" || !strings.HasPrefix(e.Tool.SealedRef, "sha256:") || strings.Contains(e.Tool.InputSummary, "ghp_abcdef") {
		t.Fatalf("full: kept %+v, want summaries and a sealed blob", e.Tool.IO)
	}
	blob, err := tio.store.Get(e.Tool.SealedRef)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sealed.Open(blob, []age.Identity{inv})
	if err != nil || c.Input != in || c.Output != out || c.Session != "s1" || c.EventID != "e-bash" {
		t.Errorf("the blob opened with the investigator's identity: %+v, %v; want the whole I/O of e-bash", c, err)
	}
	var nomatch *age.NoIdentityMatchError
	if _, err := sealed.Open(blob, []age.Identity{other}); !errors.As(err, &nomatch) {
		t.Errorf("the blob opened with another identity: %v, want refused", err)
	}

	// The ingest socket's events carry only the sender's summaries: at
	// names they go, at summaries they are redacted again.
	if e := call("write_file", nil, nil, "password=hunter2"); e.Tool.InputSummary != "" {
		t.Errorf("an ingest event at names kept its summary %q", e.Tool.InputSummary)
	}
	if e := call("read_file", nil, nil, "password=hunter2"); strings.Contains(e.Tool.InputSummary, "hunter2") || e.Tool.InputBytes != 0 {
		t.Errorf("an ingest event at summaries kept %+v, want its summary redacted and no length", e.Tool.IO)
	}
	// A model call matches the name "model".
	m := &event.Event{SessionID: "s1", Kind: event.KindModelIO, Model: &event.Model{Name: "claude"}}
	tio.keep(m, &in, &out)
	if m.Model.Verbosity != "names" || m.Model.InputSummary != "" {
		t.Errorf("model call: kept %+v, want names", m.Model.IO)
	}
}

// TestToolIOWithoutRecipients: a policy without recipients cannot be full
// (the policy refuses it), and a daemon keeps no store then.
func TestToolIOWithoutRecipients(t *testing.T) {
	tio, err := newToolIO(toolIOPolicy(t, "tool_io: {verbosity: summaries}\n"), t.TempDir())
	if err != nil || tio.store != nil {
		t.Fatalf("newToolIO = %+v, %v; want no store", tio, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// unsealer serves a daemon's RecordUnseal on the control socket.
type unsealer struct {
	control.Daemon
	d *Daemon
}

func (u unsealer) RecordUnseal(ctx context.Context, inv *event.Investigate, uid uint32) (uint64, error) {
	return u.d.RecordUnseal(ctx, inv, uid)
}

// TestUnsealControlSocket: an unseal sent to the control socket is
// journaled with the peer's uid from its credentials, never the request's.
func TestUnsealControlSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	j, dir := journaltest.Open(t)
	d := &Daemon{cfg: &Config{Host: "h1"}, app: j, log: hclog.NewNullLogger()}
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	c := control.Serve(ln, unsealer{d: d}, attribution.New(noSessions{}), hclog.NewNullLogger())
	defer c.Close()
	forged := uint32(1234)
	inv := &event.Investigate{Session: "s1", Events: []uint64{7}, Refs: []string{"sha256:" + strings.Repeat("a", 64)}, Reason: "IR-1",
		UID: &forged, Actor: "someone else", Recipient: "age1x"}
	resp, err := control.Call(path, &control.Request{Op: control.OpUnseal, Unseal: inv})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.Call(path, &control.Request{Op: control.OpUnseal, Unseal: &event.Investigate{Session: "s1", Events: []uint64{7}, Refs: inv.Refs}}); err == nil {
		t.Error("an unseal without a reason was journaled")
	}
	var got []*event.Event
	journal.Scan(dir, 0, func(seq uint64, raw []byte) error {
		e, err := event.DecodeStored(raw)
		if err == nil && e.Investigate != nil {
			e.Seq = seq
			got = append(got, e)
		}
		return nil
	})
	if len(got) != 1 || got[0].Seq != resp.Seq || got[0].Host != "h1" || got[0].Investigate.Reason != "IR-1" ||
		*got[0].Investigate.UID != 0 || got[0].Investigate.Actor == "someone else" {
		t.Fatalf("journaled unseals = %+v, want one with the peer's uid 0", got)
	}
}

// TestToolIORedaction: tokens at a line's start, behind a JSON escape or
// a tab, and one that the summary's head would cut in two, never reach a
// summary; the other free text is bounded and redacted at every level.
func TestToolIORedaction(t *testing.T) {
	tio, err := newToolIO(toolIOPolicy(t, "tool_io: {verbosity: summaries, tools: [{match: quiet, verbosity: names}]}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const ghp = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	pem := "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 100) + "\n-----END PRIVATE KEY-----\n"
	for name, in := range map[string]string{
		"newline":      "line one\n" + ghp,
		"json escape":  `{"text":"id\nAKIAIOSFODNN7EXAMPLE"}`,
		"tab":          "a\tsk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
		"cut at head":  strings.Repeat(pem, 5) + strings.Repeat("x ", (summaryHead-5*len(pem))/2-10) + ghp + ghp,
		"escaped json": `{"a":"` + strings.ReplaceAll("x\n"+ghp, "\n", `\n`) + `"}`,
	} {
		e := &event.Event{SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "t", Error: "failed: token=" + ghp + strings.Repeat("!", 1000)}}
		tio.keep(e, &in, &in)
		for _, secret := range []string{"ghp_abcdef", "AKIAIOSFODNN7", "sk-ant-api03-abcdef", "ghp_a", "MIIEvQ"} {
			if strings.Contains(e.Tool.InputSummary, secret) || strings.Contains(e.Tool.Error, secret) {
				t.Errorf("%s: %q survived: summary %q, error %q", name, secret, e.Tool.InputSummary, e.Tool.Error)
			}
		}
		if len(e.Tool.Error) > fieldLen+8 {
			t.Errorf("%s: error of %d bytes kept, want at most %d", name, len(e.Tool.Error), fieldLen)
		}
	}
	e := &event.Event{SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "quiet", Error: "password=hunter2 " + strings.Repeat("e", 5000)}}
	tio.keep(e, nil, nil)
	if strings.Contains(e.Tool.Error, "hunter2") || len(e.Tool.Error) > fieldLen+8 {
		t.Errorf("at names the error is %q, want it redacted and bounded", e.Tool.Error)
	}
}
