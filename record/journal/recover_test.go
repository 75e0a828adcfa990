package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
)

// crash stops the writer and closes the files without the final
// checkpoint, as if the process died right after its last acknowledgement.
func (j *Journal) crash() {
	j.closeOnce.Do(func() {
		close(j.closing)
		<-j.done
		j.cpMu.Lock()
		defer j.cpMu.Unlock()
		j.filesClosed = true
		j.closeFiles()
		j.closeErr = ErrClosed
	})
}

// writeUncovered writes n entries with checkpoints every 100 and "crashes",
// leaving the entries after the last multiple of 100 uncovered.
func writeUncovered(t *testing.T, dir string, s note.Signer, n int) {
	t.Helper()
	j, err := Open(dir, s, WithCheckpointEvery(100), WithCheckpointInterval(time.Hour), WithSegmentSize(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range genEvents(n, 21) {
		ev.Kind, ev.Source, ev.Session = event.KindToolInvoke, event.SourceAPI, nil
		ev.Tool = &event.Tool{Name: "bash", IO: event.IO{InputSummary: "ls"}}
		if err := j.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	j.crash()
}

func TestRecoverTornTail(t *testing.T) {
	s, v := testKey(t, "test")
	tests := []struct {
		name   string
		damage func(t *testing.T, l frameLoc) // damages the last frame at l
		detail string
	}{
		{"cut mid-header", func(t *testing.T, l frameLoc) { os.Truncate(l.path, l.offset+3) }, "incomplete frame header"},
		{"cut mid-payload", func(t *testing.T, l frameLoc) { os.Truncate(l.path, l.offset+l.length-10) }, "incomplete frame payload"},
		{"zeroed payload", func(t *testing.T, l frameLoc) {
			b := mustReadFile(t, l.path)
			clear(b[l.offset+frameHeaderSize+20 : l.offset+l.length])
			mustWriteFile(t, l.path, b)
		}, "frame checksum mismatch"},
		{"zero-filled extension", func(t *testing.T, l frameLoc) {
			f, _ := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write(make([]byte, 4096))
			f.Close()
		}, "invalid frame length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeUncovered(t, dir, s, 250)
			locs := frameLocs(t, dir)
			last := locs[len(locs)-1]
			tt.damage(t, last)
			st, _ := os.Stat(last.path)
			wantSeq := uint64(249)
			wantOffset, wantCut := last.offset, st.Size()-last.offset
			if tt.name == "zero-filled extension" {
				wantSeq, wantOffset, wantCut = 250, last.offset+last.length, 4096
			}
			// Before recovery, verify sees an uncovered torn tail.
			rep, err := Verify(dir, v, nil)
			if err != nil || rep.Status != StatusUncovered || rep.TailBytes != wantCut {
				t.Fatalf("Verify(torn) = %+v, %v, want uncovered with %d tail bytes", rep, err, wantCut)
			}
			j, err := Open(dir, s)
			if err != nil {
				t.Fatalf("Open(torn) = %v", err)
			}
			if j.Size() != wantSeq+1 {
				t.Fatalf("Size() after recovery = %d, want %d (the cut entries plus journal.recovered)", j.Size(), wantSeq+1)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := Entry(dir, wantSeq)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := event.Unmarshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := event.Journal{Segment: filepath.Base(last.path), Offset: wantOffset, CutBytes: wantCut, Detail: tt.detail}
			if ev.Kind != event.KindJournalRecovered || ev.Source != event.SourceJournal || ev.Journal == nil || *ev.Journal != want {
				t.Fatalf("entry %d = %s, want journal.recovered %+v", wantSeq, raw, want)
			}
			rep, err = Verify(dir, v, nil)
			if err != nil || rep.Status != StatusIntact || rep.Entries != wantSeq+1 {
				t.Fatalf("Verify(recovered) = %+v, %v, want intact", rep, err)
			}
		})
	}
}

func TestRecoverRefusesTampering(t *testing.T) {
	s, _ := testKey(t, "test")
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, locs []frameLoc)
	}{
		{"garbled frame followed by data", func(t *testing.T, dir string, locs []frameLoc) {
			l := locs[len(locs)-3]
			b := mustReadFile(t, l.path)
			b[l.offset+frameHeaderSize+5] ^= 0xff
			mustWriteFile(t, l.path, b)
		}},
		{"cut below the latest checkpoint", func(t *testing.T, dir string, locs []frameLoc) {
			l := locs[150]
			os.Truncate(l.path, l.offset+5)
			segs, _ := listSegments(dir)
			for _, sg := range segs {
				if sg.first > 150 {
					os.Remove(sg.path)
				}
			}
		}},
		{"entries differ from the checkpoint", func(t *testing.T, dir string, locs []frameLoc) {
			// Rewrite entry 120 with a valid frame and drop the hash file.
			l := locs[120]
			b := mustReadFile(t, l.path)
			raw := append([]byte(nil), b[l.offset+frameHeaderSize:l.offset+l.length]...)
			raw[len(raw)-3] = 'X'
			nb := append(append(b[:l.offset:l.offset], appendFrame(nil, raw)...), b[l.offset+l.length:]...)
			mustWriteFile(t, l.path, nb)
			os.Remove(filepath.Join(dir, hashFile))
		}},
		{"tail too long to be torn", func(t *testing.T, dir string, locs []frameLoc) {
			l := locs[len(locs)-1]
			f, _ := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{0xff, 0xff, 0xff, 0x7f})
			f.Write(make([]byte, maxTornBytes))
			f.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeUncovered(t, dir, s, 250)
			tt.damage(t, dir, frameLocs(t, dir))
			j, err := Open(dir, s)
			if !errors.Is(err, ErrCorrupt) {
				if j != nil {
					j.Close()
				}
				t.Fatalf("Open() = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestRepairHashFile: the hash file is derived data; Open rebuilds a lost
// or garbled one, and proofs work again.
func TestRepairHashFile(t *testing.T) {
	s, v := testKey(t, "test")
	tests := []struct {
		name   string
		damage func(p string)
	}{
		{"deleted", func(p string) { os.Remove(p) }},
		{"truncated", func(p string) { os.Truncate(p, 1000) }},
		{"garbled", func(p string) {
			b, _ := os.ReadFile(p)
			for i := range b {
				b[i] ^= 0x55
			}
			os.WriteFile(p, b, 0o600)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeUncovered(t, dir, s, 250)
			tt.damage(filepath.Join(dir, hashFile))
			j, err := Open(dir, s)
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			if err := j.Append(context.Background(), genEvents(5, 22)...); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			cp, err := LatestCheckpoint(dir, v)
			if err != nil || cp.Size != 255 {
				t.Fatalf("LatestCheckpoint() = %+v, %v", cp, err)
			}
			if _, err := Prove(dir, 17, cp); err != nil {
				t.Fatalf("Prove(17) = %v", err)
			}
			if rep, err := Verify(dir, v, nil); err != nil || rep.Status != StatusIntact {
				t.Fatalf("Verify() = %+v, %v", rep, err)
			}
		})
	}
}

const helperEnv = "JOURNAL_TEST_HELPER_DIR"

// helperAppender runs in a child process: it appends from several
// goroutines and prints "seq event_id" for each acknowledged event, until
// it is killed.
func helperAppender() {
	dir := os.Getenv(helperEnv)
	s, err := note.NewSigner(os.Getenv("JOURNAL_TEST_HELPER_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	j, err := Open(dir, s, WithCheckpointEvery(300), WithCheckpointInterval(20*time.Millisecond), WithSegmentSize(64<<10))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				ev := genEvents(1, uint64(w))[0]
				ev.EventID = fmt.Sprintf("w%d-%d", w, i)
				if err := j.Append(context.Background(), ev); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %s\n", ev.Seq, ev.EventID)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestSIGKILLLosesNoAcknowledgedEntry kills a writer process with SIGKILL
// mid-stream and checks that every entry it acknowledged is in the journal.
func TestSIGKILLLosesNoAcknowledgedEntry(t *testing.T) {
	dir := t.TempDir()
	skey, vkey, err := GenerateKey("test")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	acked := make(map[uint64]string)
	for round := range 3 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, "JOURNAL_TEST_HELPER_KEY="+skey)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		killed := false
		kill := func() {
			if !killed {
				syscall.Kill(pid, syscall.SIGKILL)
				killed = true
			}
		}
		t.Cleanup(kill)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			seqStr, id, ok := strings.Cut(sc.Text(), " ")
			seq, err := strconv.ParseUint(seqStr, 10, 64)
			if !ok || err != nil {
				t.Fatalf("helper printed %q", sc.Text())
			}
			acked[seq] = id
			if n++; n == 1500 {
				kill() // mid-stream: the workers are still appending
			}
		}
		cmd.Wait()
		if !killed {
			t.Fatalf("round %d: helper exited before it was killed", round)
		}
	}
	s, _ := note.NewSigner(skey)
	j, err := Open(dir, s)
	if err != nil {
		t.Fatalf("Open() after SIGKILL = %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	found := 0
	err = Scan(dir, 0, func(seq uint64, raw []byte) error {
		id, ok := acked[seq]
		if !ok {
			return nil
		}
		ev, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		if ev.EventID != id {
			return fmt.Errorf("entry %d holds %s, the writer acknowledged %s", seq, ev.EventID, id)
		}
		found++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(acked) {
		t.Fatalf("%d of %d acknowledged entries found after SIGKILL", found, len(acked))
	}
	vr, _ := note.NewVerifier(vkey)
	if rep, err := Verify(dir, note.VerifierList(vr), nil); err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify() after SIGKILL and reopen = %+v, %v", rep, err)
	}
}
