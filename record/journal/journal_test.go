package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
)

func TestAppendScan(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(300, 1)
	ctx := context.Background()
	for i := 0; i < len(evs); i += 7 {
		if err := j.Append(ctx, evs[i:min(i+7, len(evs))]...); err != nil {
			t.Fatal(err)
		}
	}
	if got := j.Size(); got != 300 {
		t.Fatalf("Size() = %d, want 300", got)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i) || ev.V != event.SchemaVersion {
			t.Fatalf("event %d: Seq, V = %d, %d, want %d, %d", i, ev.Seq, ev.V, i, event.SchemaVersion)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = Scan(dir, 0, func(seq uint64, raw []byte) error {
		want, err := event.Marshal(evs[seq])
		if err != nil {
			return err
		}
		if seq != uint64(n) || !bytes.Equal(raw, want) {
			t.Errorf("Scan entry %d = seq %d %s, want %s", n, seq, raw, want)
		}
		if _, err := event.Unmarshal(raw); err != nil {
			t.Errorf("Unmarshal(entry %d) = %v", seq, err)
		}
		n++
		return nil
	})
	if err != nil || n != 300 {
		t.Fatalf("Scan() = %v after %d entries, want nil after 300", err, n)
	}
	// Scan from the middle.
	var first uint64 = 1 << 63
	if err := Scan(dir, 250, func(seq uint64, raw []byte) error { first = min(first, seq); return nil }); err != nil || first != 250 {
		t.Fatalf("Scan(from 250) first seq = %d, %v, want 250", first, err)
	}
	rep, err := Verify(dir, v, nil)
	if err != nil || rep.Status != StatusIntact || rep.Entries != 300 || rep.Covered != 300 {
		t.Fatalf("Verify() = %+v, %v, want intact over 300", rep, err)
	}
}

func TestAppendRejectsInvalid(t *testing.T) {
	s, _ := testKey(t, "test")
	j, err := Open(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	good := genEvents(1, 3)[0]
	tests := []struct {
		name string
		ev   *event.Event
	}{
		{"nil", nil},
		{"no kind", &event.Event{Source: event.SourceKernel}},
		{"missing payload", &event.Event{Kind: event.KindPkgInstall, Source: event.SourceShim, SessionID: "s"}},
		{"bad source", &event.Event{Kind: event.KindToolInvoke, Source: "agent", SessionID: "s", Tool: &event.Tool{Name: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := j.Append(context.Background(), good, tt.ev)
			if err == nil {
				t.Fatalf("Append(%s) = nil, want an error", tt.name)
			}
			if j.Size() != 0 {
				t.Fatalf("Size() = %d after a rejected append, want 0", j.Size())
			}
		})
	}
}

// TestEdgeMatchesTlog checks the in-memory tree edge against tlog.
func TestEdgeMatchesTlog(t *testing.T) {
	var stored []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	x := newHasher()
	e := &edge{}
	for n := int64(0); n < 600; n++ {
		data := []byte{byte(n), byte(n >> 8), 'x'}
		want, err := tlog.StoredHashes(n, data, hr)
		if err != nil {
			t.Fatal(err)
		}
		got := e.append(x, x.leaf(data), nil)
		if len(got) != len(want) {
			t.Fatalf("edge.append(%d) = %d hashes, want %d", n, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("edge.append(%d)[%d] = %v, want %v", n, i, got[i], want[i])
			}
		}
		stored = append(stored, want...)
		th, _ := tlog.TreeHash(n+1, hr)
		if r := e.root(x); r != th {
			t.Fatalf("edge.root(%d) = %v, want %v", n+1, r, th)
		}
		le, err := loadEdge(uint64(n+1), hr)
		if err != nil || le.root(x) != th {
			t.Fatalf("loadEdge(%d).root = %v, %v, want %v", n+1, le.root(x), err, th)
		}
	}
}

func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointEvery(100), WithCheckpointInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const workers, per = 16, 150
	evs := genEvents(workers*per, 2)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				k := w*per + i
				if i%10 == 9 { // sometimes several at once
					continue
				}
				n := 1
				if i%10 == 8 {
					n = 2
				}
				if err := j.Append(context.Background(), evs[k:k+n]...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint64]string)
	for _, ev := range evs {
		if prev, ok := seen[ev.Seq]; ok {
			t.Fatalf("seq %d given to %s and %s", ev.Seq, prev, ev.EventID)
		}
		seen[ev.Seq] = ev.EventID
	}
	if uint64(len(seen)) != j.Size() || j.Size() != workers*per {
		t.Fatalf("%d distinct seqs, Size() = %d, want %d", len(seen), j.Size(), workers*per)
	}
	for seq := range uint64(workers * per) {
		if _, ok := seen[seq]; !ok {
			t.Fatalf("seq %d missing: seqs are not dense", seq)
		}
	}
	// Each stored entry is the event that was told its seq.
	err = Scan(dir, 0, func(seq uint64, raw []byte) error {
		ev, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		if ev.EventID != seen[seq] {
			t.Errorf("entry %d holds %s, want %s", seq, ev.EventID, seen[seq])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, v, nil)
	if err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify() = %+v, %v, want intact", rep, err)
	}
}

func TestCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointEvery(50), WithCheckpointInterval(time.Hour), WithOrigin("sandtrail/test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	evs := genEvents(120, 4)
	for _, ev := range evs {
		ev.Kind, ev.Source, ev.Session = event.KindExec, event.SourceKernel, nil
		if ev.Proc == nil {
			ev.Proc = &event.Proc{Pid: 1}
		}
	}
	for _, ev := range evs {
		if err := j.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	term := &event.Event{Kind: event.KindSessionTerminate, Source: event.SourceSession, SessionID: "s1", Session: &event.Session{Op: "terminate", Reason: "normal"}}
	if err := j.Append(ctx, term); err != nil {
		t.Fatal(err)
	}
	// The terminate checkpoint exists as soon as Append returns.
	cp, err := LatestCheckpoint(dir, v)
	if err != nil || cp.Size != 121 || cp.Origin != "sandtrail/test" {
		t.Fatalf("LatestCheckpoint() after terminate = %+v, %v, want size 121", cp, err)
	}
	for _, size := range []uint64{50, 100, 121} {
		if _, err := ReadCheckpoint(filepath.Join(dir, cpDir, checkpointName(size)), v); err != nil {
			t.Errorf("checkpoint %d: %v", size, err)
		}
	}
	// Checkpoint now with no growth returns the last one.
	again, err := j.Checkpoint(ctx)
	if err != nil || again.Size != 121 {
		t.Fatalf("Checkpoint() = %+v, %v, want size 121", again, err)
	}
	if err := j.Append(ctx, genEvents(3, 5)...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err = LatestCheckpoint(dir, v)
	if err != nil || cp.Size != 124 {
		t.Fatalf("LatestCheckpoint() after Close = %+v, %v, want size 124", cp, err)
	}
	if _, err := j.Checkpoint(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint() after Close = %v, want ErrClosed", err)
	}
	if err := j.Append(ctx, genEvents(1, 6)...); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append() after Close = %v, want ErrClosed", err)
	}
}

func TestCheckpointInterval(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(context.Background(), genEvents(3, 7)...); err != nil {
		t.Fatal(err)
	}
	// No deadline on speed: wait until the interval checkpoint shows up.
	for {
		cp, err := LatestCheckpoint(dir, v)
		if err == nil && cp.Size == 3 {
			break
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReopenAndLock(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, s); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open() = %v, want ErrLocked", err)
	}
	ctx := context.Background()
	for _, ev := range genEvents(100, 8) {
		if err := j.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = Open(dir, s, WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(50, 9)
	if err := j.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq != 100 || j.Size() != 150 {
		t.Fatalf("after reopen: first seq %d, Size() %d, want 100, 150", evs[0].Seq, j.Size())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := listSegments(dir)
	if len(segs) < 5 {
		t.Fatalf("%d segments with a 4 KiB segment size, want several", len(segs))
	}
	rep, err := Verify(dir, v, nil)
	if err != nil || rep.Status != StatusIntact || rep.Entries != 150 || rep.Segments != len(segs) {
		t.Fatalf("Verify() = %+v, %v, want intact over 150 entries", rep, err)
	}
	raw, err := Entry(dir, 123)
	if err != nil {
		t.Fatal(err)
	}
	if seq, ok := payloadSeq(raw); !ok || seq != 123 {
		t.Fatalf("Entry(123) holds seq %d, %v", seq, ok)
	}
	if _, err := Entry(dir, 150); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Entry(150) = %v, want ErrNotFound", err)
	}
}

func TestChanged(t *testing.T) {
	s, _ := testKey(t, "test")
	j, err := Open(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ch := j.Changed()
	select {
	case <-ch:
		t.Fatal("Changed() closed before any append")
	default:
	}
	if err := j.Append(context.Background(), genEvents(1, 10)...); err != nil {
		t.Fatal(err)
	}
	<-ch // closed by the append (blocks forever if not, failing by timeout)
	select {
	case <-j.Changed():
		t.Fatal("new Changed() channel already closed")
	default:
	}
}

func TestProveAndTamperedEntry(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointEvery(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), genEvents(777, 11)...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err := LatestCheckpoint(dir, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 1, 255, 256, 500, 776} {
		proof, err := Prove(dir, seq, cp)
		if err != nil {
			t.Fatalf("Prove(%d) = %v", seq, err)
		}
		raw, _ := Entry(dir, seq)
		if err := tlog.CheckRecord(proof, int64(cp.Size), cp.Root, int64(seq), LeafHash(raw)); err != nil {
			t.Fatalf("CheckRecord(Prove(%d)) = %v", seq, err)
		}
		other, _ := Entry(dir, (seq+1)%777)
		if tlog.CheckRecord(proof, int64(cp.Size), cp.Root, int64(seq), LeafHash(other)) == nil {
			t.Fatalf("CheckRecord(Prove(%d)) accepts another entry", seq)
		}
	}
	if _, err := Prove(dir, 777, cp); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Prove(777) = %v, want ErrNotFound", err)
	}
	// A tampered entry yields no proof.
	locs := frameLocs(t, dir)
	b := mustReadFile(t, locs[300].path)
	b[locs[300].offset+20] ^= 1
	mustWriteFile(t, locs[300].path, b)
	if _, err := Prove(dir, 300, cp); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Prove(300) on a flipped entry = %v, want ErrCorrupt", err)
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	skey, vkey, err := GenerateKey("sandtrail/host-1")
	if err != nil {
		t.Fatal(err)
	}
	derived, err := VerifierKey(skey)
	if err != nil || derived != vkey {
		t.Fatalf("VerifierKey() = %q, %v, want %q", derived, err, vkey)
	}
	kf := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(kf, []byte(skey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(kf); !errors.Is(err, ErrBadKey) {
		t.Fatalf("LoadSigner(mode 0644) = %v, want ErrBadKey", err)
	}
	os.Chmod(kf, 0o600)
	sg, err := LoadSigner(kf)
	if err != nil || sg.Name() != "sandtrail/host-1" {
		t.Fatalf("LoadSigner() = %v, %v", sg, err)
	}
	pf := filepath.Join(dir, "checkpoint.pub")
	os.WriteFile(pf, []byte(vkey+"\n"), 0o644)
	vr, err := LoadVerifier(pf)
	if err != nil || vr.KeyHash() != sg.KeyHash() {
		t.Fatalf("LoadVerifier() = %v, %v", vr, err)
	}
	os.WriteFile(pf, []byte("garbage"), 0o644)
	if _, err := LoadVerifier(pf); !errors.Is(err, ErrBadKey) {
		t.Fatalf("LoadVerifier(garbage) = %v, want ErrBadKey", err)
	}
	if _, err := VerifierKey("PRIVATE+KEY+x"); !errors.Is(err, ErrBadKey) {
		t.Fatalf("VerifierKey(garbage) = %v, want ErrBadKey", err)
	}
}

// TestFollowWhileAppending reads the journal with Scan and Verify while a
// writer appends: a follower sees every entry once, in order, and Verify
// never reports a live journal as tampered.
func TestFollowWhileAppending(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "test")
	j, err := Open(dir, s, WithCheckpointEvery(64), WithCheckpointInterval(2*time.Millisecond), WithSegmentSize(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	const total = 3000
	evs := genEvents(total, 31)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < total; i += 3 {
			if err := j.Append(context.Background(), evs[i:min(i+3, total)]...); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var next uint64
	verifies := 0
	writerDone := false
	for next < total {
		ch := j.Changed()
		err := Scan(dir, next, func(seq uint64, raw []byte) error {
			if seq != next {
				return fmt.Errorf("Scan gave seq %d, want %d", seq, next)
			}
			if id := evs[seq].EventID; !bytes.Contains(raw, []byte(`"event_id":"`+id+`"`)) {
				return fmt.Errorf("entry %d does not hold %s", seq, id)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if verifies < 20 {
			rep, err := Verify(dir, v, nil)
			if err != nil || rep.Status == StatusTampered {
				t.Fatalf("Verify() of a live journal = %+v, %v", rep, err)
			}
			verifies++
		}
		if next >= total {
			break
		}
		if !writerDone {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				writerDone = true
			case <-ch:
			}
		}
	}
	if !writerDone {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir, v, nil); err != nil || rep.Status != StatusIntact || rep.Entries != total {
		t.Fatalf("Verify() after Close = %+v, %v", rep, err)
	}
}
