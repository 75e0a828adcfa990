package intel

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// snapshot is what the store answers lookups from, loaded whole from the
// file: each listed package's matchers, the digests and every IOC. It
// holds no record text, so that a mirror with every npm record in its
// store keeps only what it matches with.
type snapshot struct {
	generation int64
	packages   map[string][]entry // ecosystem NUL normalized name
	hashes     map[string][]string
	iocs       []IOC
}

// entry is one affected package of a record.
type entry struct {
	id    string
	match *matcher
}

// reload reads the snapshot from the file.
func (s *Store) reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("loading intel store: %w", err)
	}
	defer tx.Rollback()
	sn := &snapshot{packages: map[string][]entry{}, hashes: map[string][]string{}}
	if sn.generation, err = generation(ctx, tx); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT ecosystem, name, id, affected FROM packages`)
	if err != nil {
		return fmt.Errorf("loading intel store: %w", err)
	}
	for rows.Next() {
		var eco, name, id string
		var raw []byte
		if err := rows.Scan(&eco, &name, &id, &raw); err != nil {
			rows.Close()
			return fmt.Errorf("loading intel store: %w", err)
		}
		var a Affected
		if err := json.Unmarshal(raw, &a); err != nil {
			rows.Close()
			return fmt.Errorf("loading intel store: record %s: %w", id, err)
		}
		k := eco + "\x00" + name
		sn.packages[k] = append(sn.packages[k], entry{id: id, match: newMatcher(&a)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("loading intel store: %w", err)
	}
	if sn.iocs, err = loadIOCs(ctx, tx); err != nil {
		return err
	}
	for _, i := range sn.iocs {
		if i.Kind == IOCSHA256 {
			sn.hashes[i.Value] = append(sn.hashes[i.Value], i.Advisory)
		}
	}
	s.snap.Store(sn)
	return nil
}

func loadIOCs(ctx context.Context, tx *sql.Tx) ([]IOC, error) {
	rows, err := tx.QueryContext(ctx, `SELECT kind, value, id FROM iocs ORDER BY kind, value, id`)
	if err != nil {
		return nil, fmt.Errorf("loading intel IOCs: %w", err)
	}
	defer rows.Close()
	var out []IOC
	for rows.Next() {
		var i IOC
		if err := rows.Scan(&i.Kind, &i.Value, &i.Advisory); err != nil {
			return nil, fmt.Errorf("loading intel IOCs: %w", err)
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// iocsOf lists r's indicators as the store keeps them.
func iocsOf(r *Record) []IOC {
	var out []IOC
	for _, k := range []struct {
		kind   string
		values []string
	}{{IOCDomain, r.IOCs.Domains}, {IOCURL, r.IOCs.URLs}, {IOCIP, r.IOCs.IPs}, {IOCSHA256, r.IOCs.SHA256}} {
		for _, v := range k.values {
			out = append(out, IOC{Kind: k.kind, Value: v, Advisory: r.ID})
		}
	}
	slices.SortFunc(out, func(a, b IOC) int { return strings.Compare(a.Kind+"\x00"+a.Value, b.Kind+"\x00"+b.Value) })
	return slices.CompactFunc(out, func(a, b IOC) bool { return a.Kind == b.Kind && a.Value == b.Value })
}
