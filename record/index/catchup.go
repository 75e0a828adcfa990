package index

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/tlog"
)

// waitSource is the part of a live journal that Follow needs.
type waitSource interface {
	// Size is the number of durable entries, the next seq.
	Size() uint64
	// Changed returns a channel closed at the next durable append.
	Changed() <-chan struct{}
}

// CatchUp indexes every journal entry after the cursor and returns how many
// entries it read. It returns an error wrapping ErrNoJournal when
// journalDir does not exist, and ErrStale when the journal no longer holds
// the last indexed entry as it was indexed.
func (ix *Index) CatchUp(ctx context.Context, journalDir string) (uint64, error) {
	return ix.catchUp(ctx, journalDir, 0, nil)
}

func (ix *Index) catchUp(ctx context.Context, journalDir string, total uint64, progress func(done, total uint64)) (uint64, error) {
	if fi, err := os.Stat(journalDir); err != nil || !fi.IsDir() {
		return 0, fmt.Errorf("%w: %s is not a journal directory", ErrNoJournal, journalDir)
	}
	from, err := ix.next(ctx, ix.db)
	if err != nil {
		return 0, err
	}
	// The scan starts one entry early, at the last one indexed, to check
	// that the journal still holds it: an index must not mix two journals.
	var n uint64
	batch := make([]Entry, 0, ix.o.batch)
	var buf []byte
	scanFrom, check := from, from > 0
	var want []byte
	if check {
		scanFrom = from - 1
		if want, err = ix.indexedRaw(ctx, from-1); err != nil {
			return 0, err
		}
	}
	flush := func() error {
		if err := ix.Add(ctx, batch); err != nil {
			return err
		}
		n += uint64(len(batch))
		batch, buf = batch[:0], buf[:0]
		if progress != nil {
			progress(from+n, max(total, from+n))
		}
		return nil
	}
	add := func(seq uint64, raw []byte) error {
		// raw is only valid during the call: copy it into one buffer per
		// batch. When append moves the buffer, earlier entries keep
		// pointing into the old array, which nothing writes to again.
		start := len(buf)
		buf = append(buf, raw...)
		batch = append(batch, Entry{Seq: seq, Raw: buf[start:len(buf):len(buf)]})
		if len(batch) == ix.o.batch {
			return flush()
		}
		return nil
	}
	err = ix.o.scan(journalDir, scanFrom, func(seq uint64, raw []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if check {
			check = false
			if seq != from-1 || want != nil && !bytes.Equal(raw, want) {
				return fmt.Errorf("%w: entry %d differs from the indexed one", ErrStale, from-1)
			}
			return nil
		}
		return add(seq, raw)
	}, func(seq uint64, leaf tlog.Hash) error {
		if check {
			// The last indexed entry was pruned since: the index holds
			// it still (Forget has not run yet) or not at all.
			check = false
			if seq != from-1 || want != nil && leafHash(want) != leaf {
				return fmt.Errorf("%w: entry %d differs from the indexed one", ErrStale, from-1)
			}
		}
		return nil // a pruned entry has nothing to index
	})
	if err != nil {
		return n, fmt.Errorf("reading journal %s: %w", journalDir, err)
	}
	if check {
		return n, fmt.Errorf("%w: it has no entry %d, which is indexed", ErrStale, from-1)
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// indexedRaw returns the indexed entry seq, or nil when the index has no
// row of it (skipped as undecodable, or forgotten as pruned).
func (ix *Index) indexedRaw(ctx context.Context, seq uint64) ([]byte, error) {
	var raw string
	err := ix.db.QueryRowContext(ctx, `SELECT raw FROM events WHERE seq = ?`, int64(seq)).Scan(&raw)
	switch {
	case err == nil:
		return []byte(raw), nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	}
	return nil, fmt.Errorf("reading last indexed entry: %w", err)
}

// Follow catches up with the journal, then waits for it to change and
// catches up again, until ctx is done. It returns ctx's error, or the first
// error from reading the journal or writing the index.
func (ix *Index) Follow(ctx context.Context, journalDir string, j waitSource) error {
	for {
		ch := j.Changed() // taken before catching up, so no append is missed
		next, err := ix.next(ctx, ix.db)
		if err != nil {
			return err
		}
		if j.Size() > next {
			if _, err := ix.CatchUp(ctx, journalDir); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Rebuild indexes the whole journal from seq 0 into this index, which
// should be new and empty (see Reindex), reporting progress after each
// batch (done entries so far; total is the size of the journal when it is
// known, else equal to done). It then builds any deferred indexes (Finish).
func (ix *Index) Rebuild(ctx context.Context, journalDir string, progress func(done, total uint64)) error {
	if next, err := ix.next(ctx, ix.db); err != nil {
		return err
	} else if next != 0 {
		return fmt.Errorf("rebuilding index: %s is not empty (cursor at %d)", ix.path, next)
	}
	if _, err := ix.catchUp(ctx, journalDir, 0, progress); err != nil {
		return err
	}
	return ix.Finish(ctx)
}

// Reindex rebuilds the index file at path from the journal: it builds a new
// file beside it and renames it over path only when complete, so readers
// see the old index or the new one, never a partial one.
func Reindex(ctx context.Context, path, journalDir string, progress func(done, total uint64), opts ...Option) error {
	if fi, err := os.Stat(journalDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a journal directory", ErrNoJournal, journalDir)
	}
	tmp := fmt.Sprintf("%s.rebuild-%d", path, os.Getpid())
	removeDB(tmp)
	ix, err := Open(tmp, append(opts, WithBulk())...)
	if err != nil {
		return err
	}
	err = ix.Rebuild(ctx, journalDir, progress)
	if err == nil {
		// Leave no write-ahead log beside the new file: it is renamed
		// alone.
		_, err = ix.db.ExecContext(ctx, `PRAGMA journal_mode=DELETE`)
		if err != nil {
			err = fmt.Errorf("finishing rebuilt index: %w", err)
		}
	}
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeDB(tmp)
		return err
	}
	// The old file's write-ahead log must not be read with the new file.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			removeDB(tmp)
			return fmt.Errorf("removing old index log: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		removeDB(tmp)
		return fmt.Errorf("replacing index: %w", err)
	}
	return nil
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
}

// OpenCurrent opens the index at path brought up to date with the journal
// in journalDir: the one way the daemon and the commands open it. An index
// of another schema version (ErrSchema), or one that no longer matches the
// journal (ErrStale: the journal was replaced or cut back, so the index
// describes another record), is rebuilt from the journal, the truth. It
// returns an error wrapping ErrNoJournal when journalDir is not a journal
// directory. The caller closes the index.
func OpenCurrent(ctx context.Context, path, journalDir string, opts ...Option) (*Index, error) {
	if fi, err := os.Stat(journalDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a journal directory", ErrNoJournal, journalDir)
	}
	ix, err := Open(path, opts...)
	if errors.Is(err, ErrSchema) {
		ix, err = reopen(ctx, path, journalDir, "index schema changed, rebuilding", err, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (sandtrail reindex rebuilds the index from the journal)", err)
	}
	_, err = ix.CatchUp(ctx, journalDir)
	if errors.Is(err, ErrStale) {
		ix.Close()
		if ix, err = reopen(ctx, path, journalDir, "index does not match the journal, rebuilding", err, opts); err != nil {
			return nil, err
		}
		_, err = ix.CatchUp(ctx, journalDir)
	}
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("catching up with the journal: %w", err)
	}
	return ix, nil
}

// reopen rebuilds the index at path from the journal (Reindex), saying why
// in the log, and opens it.
func reopen(ctx context.Context, path, journalDir, why string, cause error, opts []Option) (*Index, error) {
	o := options{log: hclog.NewNullLogger()}
	for _, opt := range opts {
		opt(&o)
	}
	o.log.Named("index").Info(why, "index", path, "cause", cause)
	if err := Reindex(ctx, path, journalDir, nil, opts...); err != nil {
		return nil, err
	}
	return Open(path, opts...)
}
