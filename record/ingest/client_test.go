package ingest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

func TestSendSpoolsWhenDown(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	c, err := Dial(filepath.Join(dir, "no-daemon.sock"), WithSpool(spool, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func() error {
		return c.Send(context.Background(), &event.Event{SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "t"}})
	}
	tests := []struct {
		name    string
		wantErr error
		wantN   int
	}{
		{name: "first spooled", wantErr: ErrSpooled, wantN: 1},
		{name: "second spooled", wantErr: ErrSpooled, wantN: 2},
		{name: "spool full", wantErr: ErrSpoolFull, wantN: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := send(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Send = %v, want %v", err, tt.wantErr)
			}
			if n, err := c.Spooled(); err != nil || n != tt.wantN {
				t.Fatalf("Spooled() = %d, %v, want %d", n, err, tt.wantN)
			}
		})
	}
	ents, err := os.ReadDir(spool)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left in the spool", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(spool, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeBatch(b); err != nil {
			t.Errorf("spooled %s is not a request: %v", e.Name(), err)
		}
	}
	if fi, err := os.Stat(spool); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("spool directory mode = %v, %v, want 0700", fi.Mode().Perm(), err)
	}
}

func TestSendWithoutSpool(t *testing.T) {
	c, err := Dial(filepath.Join(t.TempDir(), "no-daemon.sock"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), &event.Event{SessionID: "s", Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "t"}})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Send without daemon or spool = %v, want ErrUnavailable", err)
	}
	if _, err := Dial(""); err == nil {
		t.Fatalf("Dial(\"\") = nil error, want one")
	}
}
