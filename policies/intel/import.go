package intel

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sandtrail/sandtrail/resolver"
)

// Counts says what an import read and did.
type Counts struct {
	// Kept counts the records stored: new, changed or unchanged.
	Kept int `json:"kept"`
	// Unchanged counts the kept records the store held already as read.
	Unchanged int `json:"unchanged"`
	// Withdrawn counts the withdrawn records read (in a withdrawn/
	// directory, or with a withdrawn time); Removed those of them that the
	// store held, and removed.
	Withdrawn int `json:"withdrawn"`
	Removed   int `json:"removed"`
	// Skipped counts the files not kept; SkippedBy says why (see the Skip
	// constants), an affected ecosystem that sandtrail does not record
	// as "ecosystem:NAME".
	Skipped   int            `json:"skipped"`
	SkippedBy map[string]int `json:"skipped_by"`
	// Ecosystems counts the kept and withdrawn records by sandtrail
	// ecosystem (a record of two counts in both).
	Ecosystems map[string]*EcosystemCounts `json:"ecosystems"`
	// Errors are the first files that could not be read or parsed, with
	// why.
	Errors []string `json:"errors,omitempty"`
}

// EcosystemCounts are an ecosystem's share of an import.
type EcosystemCounts struct {
	Kept      int `json:"kept"`
	Withdrawn int `json:"withdrawn"`
}

// Why Counts.SkippedBy skipped a file.
const (
	SkipStaging      = "staging"       // MAL-0000-…
	SkipNotMalicious = "not_malicious" // not a MAL- record
	SkipInvalid      = "invalid"       // unreadable, or not an OSV record
	SkipStale        = "stale"         // older than the record the store holds
)

const maxErrors = 20

func (c *Counts) skip(why string) {
	c.Skipped++
	c.SkippedBy[why]++
}

func (c *Counts) fail(name string, err error) {
	c.skip(SkipInvalid)
	if len(c.Errors) < maxErrors {
		c.Errors = append(c.Errors, fmt.Sprintf("%s: %v", name, err))
	}
}

func (c *Counts) eco(name string) *EcosystemCounts {
	e := c.Ecosystems[name]
	if e == nil {
		e = &EcosystemCounts{}
		c.Ecosystems[name] = e
	}
	return e
}

// importBatch is how many files go into one transaction.
const importBatch = 2000

// Import reads every record of root (see Read) into the store and returns
// what it did. It is idempotent: importing the same files again changes
// nothing (every record is then Unchanged). A record replaces the store's
// record of the same id unless the store's is newer (modified later); a
// withdrawn one removes it. Records the store holds that root does not
// name stay: an import adds to the store, as a delta would. The mirror
// and other readers see the new state once Import returns.
func (s *Store) Import(ctx context.Context, root string) (Counts, error) {
	c := Counts{SkippedBy: map[string]int{}, Ecosystems: map[string]*EcosystemCounts{}}
	var batch []File
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.apply(ctx, batch, &c)
		batch = batch[:0]
		return err
	}
	err := Read(root, func(f File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch = append(batch, f)
		if len(batch) == importBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return c, fmt.Errorf("importing %s: %w", root, err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('generation', 1)
		ON CONFLICT(key) DO UPDATE SET value = value + 1`); err != nil {
		return c, fmt.Errorf("importing %s: %w", root, err)
	}
	return c, s.Refresh(ctx)
}

// apply writes one batch of files in one transaction.
func (s *Store) apply(ctx context.Context, files []File, c *Counts) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing intel store: %w", err)
	}
	defer tx.Rollback()
	for _, f := range files {
		if err := applyFile(ctx, tx, f, c); err != nil {
			return fmt.Errorf("writing intel store: %s: %w", f.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing intel store: %w", err)
	}
	return nil
}

// applyFile classifies one file and writes what it says.
func applyFile(ctx context.Context, tx *sql.Tx, f File, c *Counts) error {
	switch {
	case f.Staging:
		c.skip(SkipStaging)
		return nil
	case errors.Is(f.Err, ErrNotMalicious):
		c.skip(SkipNotMalicious)
		return nil
	case f.Err != nil:
		c.fail(f.Name, f.Err)
		return nil
	}
	r, err := ParseRecord(f.Data)
	switch {
	case errors.Is(err, ErrStaging):
		c.skip(SkipStaging)
		return nil
	case errors.Is(err, ErrNotMalicious):
		c.skip(SkipNotMalicious)
		return nil
	case errors.Is(err, ErrInvalid):
		c.fail(f.Name, err)
		return nil
	case f.Withdrawn || !r.Withdrawn.IsZero():
		return withdraw(ctx, tx, r, c)
	case errors.Is(err, ErrNoPackage):
		for _, o := range r.Other {
			c.SkippedBy["ecosystem:"+o]++
		}
		c.Skipped++
		_, err := remove(ctx, tx, r.ID) // a record that no longer names one of ours
		return err
	}
	return keep(ctx, tx, r, c)
}

func withdraw(ctx context.Context, tx *sql.Tx, r *Record, c *Counts) error {
	c.Withdrawn++
	for _, e := range ecosystemsOf(r) {
		c.eco(e).Withdrawn++
	}
	n, err := remove(ctx, tx, r.ID)
	if n > 0 {
		c.Removed++
	}
	return err
}

// remove deletes the record id; n says whether the store had it.
func remove(ctx context.Context, tx *sql.Tx, id string) (n int64, err error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM records WHERE id = ?`, id)
	if err != nil {
		return 0, err
	}
	n, _ = res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM packages WHERE id = ?`, id); err != nil {
		return n, err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM iocs WHERE id = ?`, id)
	return n, err
}

// keep stores r, replacing the store's record of its id unless that one
// is newer.
func keep(ctx context.Context, tx *sql.Tx, r *Record, c *Counts) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var oldMod int64
	var oldRaw []byte
	err = tx.QueryRowContext(ctx, `SELECT modified, raw FROM records WHERE id = ?`, r.ID).Scan(&oldMod, &oldRaw)
	held := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case oldMod > r.Modified.UnixNano():
		c.skip(SkipStale)
		return nil
	case bytes.Equal(oldRaw, raw):
		c.Kept++
		c.Unchanged++
		for _, e := range ecosystemsOf(r) {
			c.eco(e).Kept++
		}
		return nil
	}
	if held {
		if _, err := remove(ctx, tx, r.ID); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO records(id, modified, raw) VALUES(?, ?, ?)`, r.ID, r.Modified.UnixNano(), raw); err != nil {
		return err
	}
	for i := range r.Affected {
		a := &r.Affected[i]
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO packages(ecosystem, name, id, n, affected) VALUES(?, ?, ?, ?, ?)`,
			a.Ecosystem, resolver.NormalizeName(a.Ecosystem, a.Name), r.ID, i, b); err != nil {
			return err
		}
	}
	for _, i := range iocsOf(r) {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO iocs(kind, value, id) VALUES(?, ?, ?)`, i.Kind, i.Value, i.Advisory); err != nil {
			return err
		}
	}
	c.Kept++
	for _, e := range ecosystemsOf(r) {
		c.eco(e).Kept++
	}
	return nil
}

// ecosystemsOf lists the sandtrail ecosystems of r's affected packages,
// each once, in order.
func ecosystemsOf(r *Record) []string {
	var out []string
	for _, a := range r.Affected {
		if !slices.Contains(out, a.Ecosystem) {
			out = append(out, a.Ecosystem)
		}
	}
	return out
}
