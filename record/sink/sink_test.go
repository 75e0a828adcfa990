package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

func testJournal(t *testing.T) (*journal.Journal, string) {
	t.Helper()
	s, _ := journaltest.Keys(t, "sink")
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, dir
}

func appendExecs(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	if err := j.Append(context.Background(), execs(n)...); err != nil {
		t.Fatal(err)
	}
}

// execs are n process.exec events of session s1, at a fixed time.
func execs(n int) []*event.Event {
	var evs []*event.Event
	for i := range n {
		evs = append(evs, &event.Event{V: event.SchemaVersion, TS: time.Unix(1e9, 0), SessionID: "s1", Kind: event.KindExec,
			Source: event.SourceKernel, Proc: &event.Proc{Pid: int32(100 + i), Comm: "true", Argv: []string{"true"}}})
	}
	return evs
}

// checkDelivered checks that every seq below total arrived (counts: how
// many times each did), so that after dedupe by seq each is there exactly
// once, and returns the duplicates.
func checkDelivered(t *testing.T, total int, counts map[uint64]int) (dups int) {
	t.Helper()
	for seq := range uint64(total) {
		if counts[seq] == 0 {
			t.Errorf("seq %d never arrived", seq)
		}
		dups += max(counts[seq]-1, 0)
	}
	if len(counts) != total {
		t.Errorf("%d distinct seqs arrived, want %d", len(counts), total)
	}
	return dups
}

// seqsOf reads the seqs of a JSONL file's events, in order.
func seqsOf(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Seq      *uint64 `json:"seq"`
			Metadata struct {
				Sequence uint64 `json:"sequence"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Bytes())
		}
		if e.Seq != nil {
			out = append(out, *e.Seq)
		} else {
			out = append(out, e.Metadata.Sequence)
		}
	}
	return out
}

// start runs a Runner of cfg into s until the test ends or stop is
// called.
func start(t *testing.T, cfg Config, s Sink, j *journal.Journal) (*Runner, func()) {
	t.Helper()
	r, err := NewRunner(cfg, s, j)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func waitLen(t *testing.T, what string, n int, f func() int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for f() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, f(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFileSinkResumes: a file sink gets every entry, in order, as they are
// appended; stopped and started again, it resumes at its cursor with
// nothing lost and nothing sent twice.
func TestFileSinkResumes(t *testing.T) {
	j, dir := testJournal(t)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	cfg := Config{Name: "file", JournalDir: dir, CursorDir: t.TempDir(), Batch: 7}
	appendExecs(t, j, 20)
	f, err := NewFile(out, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, stop := start(t, cfg, f, j)
	appendExecs(t, j, 5)
	waitLen(t, "lines", 25, func() int { return len(seqsOf(t, out)) })
	stop()
	f.Close()
	if st := r.Status(); st.Cursor != 25 || st.Lag != 0 || st.Sent != 25 {
		t.Errorf("Status = %+v, want cursor 25, lag 0, sent 25", st)
	}
	appendExecs(t, j, 10)
	f2, err := NewFile(out, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, stop2 := start(t, cfg, f2, j)
	waitLen(t, "lines after the restart", 35, func() int { return len(seqsOf(t, out)) })
	stop2()
	f2.Close()
	for i, s := range seqsOf(t, out) {
		if s != uint64(i) {
			t.Fatalf("line %d has seq %d, want %d: lost or sent twice", i, s, i)
		}
	}
}

// flaky fails its first writes, then writes into a File.
type flaky struct {
	mu    sync.Mutex
	fails int
	*File
}

func (s *flaky) Write(ctx context.Context, b []Entry) error {
	s.mu.Lock()
	if s.fails > 0 {
		s.fails--
		s.mu.Unlock()
		return errors.New("receiver down")
	}
	s.mu.Unlock()
	return s.File.Write(ctx, b)
}

// TestSinkOutage: a sink whose receiver is down lags, says why in Status,
// and never holds the journal back; once it is back, it catches up with
// nothing lost or duplicated.
func TestSinkOutage(t *testing.T) {
	j, dir := testJournal(t)
	out := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := NewFile(out, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &flaky{fails: 3, File: f}
	r, _ := start(t, Config{Name: "flaky", JournalDir: dir, CursorDir: t.TempDir(), MaxBackoff: 50 * time.Millisecond}, s, j)
	appendExecs(t, j, 30)
	if j.Size() != 30 {
		t.Fatalf("journal size %d, want 30: a sink held it back", j.Size())
	}
	waitLen(t, "lines", 30, func() int { return len(seqsOf(t, out)) })
	if got := seqsOf(t, out); len(got) != 30 || got[29] != 29 {
		t.Errorf("seqs = %v, want 0..29 once each", got)
	}
	waitLen(t, "status", 30, func() int { return int(r.Status().Cursor) })
	if st := r.Status(); st.LastError != "" || st.Lag != 0 {
		t.Errorf("Status after recovery = %+v, want no error and no lag", st)
	}
}

// TestOCSFFormat: an ocsf sink writes OCSF events, each with its seq in
// metadata.sequence.
func TestOCSFFormat(t *testing.T) {
	j, dir := testJournal(t)
	out := filepath.Join(t.TempDir(), "ocsf.jsonl")
	f, err := NewFile(out, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start(t, Config{Name: "ocsf", Format: FormatOCSF, JournalDir: dir, CursorDir: t.TempDir()}, f, j)
	appendExecs(t, j, 4)
	waitLen(t, "lines", 4, func() int { return len(seqsOf(t, out)) })
	b, _ := os.ReadFile(out)
	var first map[string]any
	if err := json.Unmarshal(b[:bytes.IndexByte(b, '\n')], &first); err != nil || first["class_uid"] != float64(1007) {
		t.Errorf("first line = %s, want a Process Activity (1007)", b[:bytes.IndexByte(b, '\n')])
	}
}

// TestFileRotates: past its size the file is renamed .1, .2, ..., the
// oldest past keep removed, and no entry is lost across the files.
func TestFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "e.jsonl")
	f, err := NewFile(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := []byte(`{"seq":0,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	for range 4 {
		if err := f.Write(context.Background(), []Entry{{Line: line}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"e.jsonl", "e.jsonl.1", "e.jsonl.2"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "e.jsonl.3")); err == nil {
		t.Error("e.jsonl.3 kept, want at most 2 rotated files")
	}
}

// TestBadConfig: a bad name, a bad format and an unreadable cursor are
// errors, not a resend of everything.
func TestBadConfig(t *testing.T) {
	j, dir := testJournal(t)
	cur := t.TempDir()
	os.WriteFile(filepath.Join(cur, "x.cursor"), []byte("not a number"), 0o600)
	for _, cfg := range []Config{{Name: "a/b", JournalDir: dir, CursorDir: cur}, {Name: "y", Format: "xml", JournalDir: dir, CursorDir: cur},
		{Name: "x", JournalDir: dir, CursorDir: cur}} {
		if _, err := NewRunner(cfg, NewStream(os.Stdout), j); err == nil {
			t.Errorf("NewRunner(%+v) = nil error", cfg)
		}
	}
}
