package sealed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

func identity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestSealOpen(t *testing.T) {
	inv, other := identity(t), identity(t)
	rs, err := ParseRecipients([]string{inv.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(filepath.Join(t.TempDir(), "sealed"))
	if err != nil {
		t.Fatal(err)
	}
	in := &Contents{Session: "s1", EventID: "e1", Kind: "tool.invoke", Name: "bash", Input: `{"cmd":"cat ~/.aws/credentials"}`, Output: "aws_secret_access_key=wJalr"}
	ref, err := s.Seal(rs, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "sha256:") || len(ref) != 71 {
		t.Fatalf("ref = %q", ref)
	}
	blob, err := s.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(blob), "wJalr") {
		t.Fatal("the blob holds the output in clear")
	}
	got, err := Open(blob, []age.Identity{inv})
	if err != nil {
		t.Fatal(err)
	}
	if *got != *in {
		t.Errorf("Open = %+v, want %+v", got, in)
	}
	var nomatch *age.NoIdentityMatchError
	if _, err := Open(blob, []age.Identity{other}); !errors.As(err, &nomatch) {
		t.Errorf("Open with another identity = %v, want a NoIdentityMatchError", err)
	}
	if Recipient(inv) != inv.Recipient().String() {
		t.Errorf("Recipient = %q", Recipient(inv))
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), strings.TrimPrefix(ref, "sha256:")))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blob mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestTamperedAndMissing(t *testing.T) {
	inv := identity(t)
	s, _ := OpenStore(t.TempDir())
	ref, err := s.Seal([]age.Recipient{inv.Recipient()}, &Contents{Session: "s", Kind: "tool.invoke", Input: "a", Output: "b"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), strings.TrimPrefix(ref, "sha256:"))
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ref); !errors.Is(err, ErrTampered) {
		t.Errorf("Check of a flipped blob = %v, want ErrTampered", err)
	}
	os.Remove(path)
	if err := s.Check(ref); !errors.Is(err, ErrMissing) {
		t.Errorf("Check of a removed blob = %v, want ErrMissing", err)
	}
	for _, bad := range []string{"", "sha256:", "md5:00", "sha256:" + strings.Repeat("G", 64), "sha256:" + strings.Repeat("A", 64), "sha256:../../etc/passwd"} {
		if err := s.Check(bad); err == nil || errors.Is(err, ErrMissing) {
			t.Errorf("Check(%q) = %v, want a malformed-reference error", bad, err)
		}
	}
}

func TestParseRecipients(t *testing.T) {
	tests := []struct{ in, err string }{
		{in: "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2"},
		{in: "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh3", err: "not an age recipient"},
		{in: "AGE186W5AZXWYCW5ZP5SKP77SLVSMF7JMCFTW2MM7RLP4HWQER4YJDTQEXGNH2", err: "not an age recipient"},
		{in: "AGE-SECRET-KEY-1DR36PCANDYE628SRM32YNYRCZ4MWS34D27D3ATR0C3VZTCK7NMPQ3RFZTZ", err: "secret key"},
		{in: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA", err: "not an age recipient"},
		{in: "", err: "not an age recipient"},
		{in: "age1x\nage186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2", err: "not an age recipient"},
		{in: "age1yubikey1qwt50d05nh5vutpdzmlg5wn80xq5negm4uj9ghv0snvdd3yysf5yw3rhl3t", err: "not an age recipient"},
	}
	for _, tt := range tests {
		_, err := ParseRecipients([]string{tt.in})
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseRecipients(%q) = %v, want %q", tt.in, err, tt.err)
		}
	}
	hy, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRecipients([]string{hy.Recipient().String()}); err != nil {
		t.Errorf("hybrid recipient: %v", err)
	}
}

// TestSealBounds: I/O of HTML-heavy text seals at its own size, and I/O
// too large for a blob is refused before anything is written.
func TestSealBounds(t *testing.T) {
	inv := identity(t)
	s, _ := OpenStore(t.TempDir())
	angle := strings.Repeat("<", 20<<20)
	ref, err := s.Seal([]age.Recipient{inv.Recipient()}, &Contents{Session: "s", Kind: "tool.invoke", Input: angle})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ref); err != nil {
		t.Errorf("a blob of 20 MiB of '<': %v, want intact", err)
	}
	if _, err := s.Seal([]age.Recipient{inv.Recipient()}, &Contents{Session: "s", Kind: "tool.invoke", Input: strings.Repeat("a", MaxBlob)}); err == nil {
		t.Error("I/O over MaxBlob was sealed")
	}
	if ents, _ := os.ReadDir(s.Dir()); len(ents) != 1 {
		t.Errorf("the store holds %d files, want the one blob", len(ents))
	}
}

// TestOpenEachChecksHashes: a blob sealed for the same event id but other
// I/O (two events sharing a caller-chosen id) does not open as this
// event's.
func TestOpenEachChecksHashes(t *testing.T) {
	inv := identity(t)
	s, _ := OpenStore(t.TempDir())
	ref, err := s.Seal([]age.Recipient{inv.Recipient()}, &Contents{Session: "s", EventID: "e", Kind: "tool.invoke", Input: "other", Output: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ev := &event.Event{SessionID: "s", EventID: "e", Kind: "tool.invoke", Tool: &event.Tool{Name: "t", IO: event.IO{SealedRef: ref,
		InputSHA256: hexSum("mine"), OutputSHA256: hexSum("x")}}}
	if _, _, err := s.OpenEach([]Sealed{{Seq: 3, Event: ev, Ref: ref}}, []age.Identity{inv}); !errors.Is(err, ErrTampered) {
		t.Errorf("OpenEach of another call's blob = %v, want ErrTampered", err)
	}
	ev.Tool.InputSHA256 = hexSum("other")
	if got, _, err := s.OpenEach([]Sealed{{Seq: 3, Event: ev, Ref: ref}}, []age.Identity{inv}); err != nil || got[0].Input != "other" {
		t.Errorf("OpenEach of its own blob = %v, %v", got, err)
	}
}

// TestFind: the sealed events of one session, all or those named; a named
// seq that is not one is an error.
func TestFind(t *testing.T) {
	inv := identity(t)
	j, dir := journaltest.Open(t)
	s, _ := OpenStore(t.TempDir())
	for i, sess := range []string{"a", "b", "a", "a"} {
		ref, err := s.Seal([]age.Recipient{inv.Recipient()}, &Contents{Session: sess, Kind: "tool.invoke", Input: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(context.Background(), &event.Event{Kind: event.KindToolInvoke, Source: event.SourceAPI, SessionID: sess,
			Tool: &event.Tool{Name: "t", IO: event.IO{SealedRef: ref}}}); err != nil {
			t.Fatal(err)
		}
	}
	seqs := func(items []Sealed) (out []uint64) {
		for _, it := range items {
			out = append(out, it.Seq)
		}
		return out
	}
	if got, err := Find(dir, "a", nil); err != nil || !slices.Equal(seqs(got), []uint64{0, 2, 3}) {
		t.Errorf("Find(a) = %v, %v; want seqs 0 2 3", seqs(got), err)
	}
	if got, err := Find(dir, "a", []uint64{0}); err != nil || !slices.Equal(seqs(got), []uint64{0}) {
		t.Errorf("Find(a, 0) = %v, %v; want seq 0 alone", seqs(got), err)
	}
	if _, err := Find(dir, "a", []uint64{1}); err == nil {
		t.Error("Find(a, 1), b's event, = nil error")
	}
	if n, bad, err := s.CheckJournal(dir); n != 4 || len(bad) != 0 || err != nil {
		t.Errorf("CheckJournal = %d, %v, %v; want 4 intact", n, bad, err)
	}
}
