package central

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WithClock sets the store's clock (default time.Now), which picks the day
// partition of what is written.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// hostIDs returns the ids of hosts, adding those that are new.
func (s *Store) hostIDs(ctx context.Context, hosts []string) (map[string]int32, error) {
	out := make(map[string]int32, len(hosts))
	var missing []string
	s.mu.Lock()
	for _, h := range hosts {
		if id, ok := s.hosts[h]; ok {
			out[h] = id
		} else {
			missing = append(missing, h)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO hosts(hid, host) SELECT nextval('hosts_hid'), h FROM unnest($1::text[]) AS u(h)
		WHERE NOT EXISTS (SELECT 1 FROM hosts WHERE host = h) ORDER BY h ON CONFLICT DO NOTHING`, missing); err != nil {
		return nil, fmt.Errorf("central store: adding hosts: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT hid, host FROM hosts WHERE host = ANY($1)`, missing)
	if err != nil {
		return nil, fmt.Errorf("central store: reading hosts: %w", err)
	}
	var hid int32
	var host string
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := pgx.ForEachRow(rows, []any{&hid, &host}, func() error {
		out[host], s.hosts[host], s.names[hid] = hid, hid, host
		return nil
	}); err != nil {
		return nil, fmt.Errorf("central store: reading hosts: %w", err)
	}
	return out, nil
}

// hostName is the name of host id hid, which hostIDs has cached.
func (s *Store) hostName(hid int32) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.names[hid]; ok {
		return h
	}
	return fmt.Sprintf("#%d", hid)
}

// forgetDicts drops the dictionary caches after a failed transaction,
// whose keys may not have been kept.
func (s *Store) forgetDicts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dicts = newDicts()
}

// partitionLock is the advisory lock key that serializes making partitions.
const partitionLock = 0x53414e45

// partitioned are the tables partitioned by day.
var partitioned = []string{"events", "files", "nets", "pkgs"}

// daysAhead is how many days' partitions are made before they are needed.
const daysAhead = 3

// ensureDays makes the partitions of day and the daysAhead after it. Making
// one waits for every open read of the parent table (it takes an ACCESS
// EXCLUSIVE lock), so it waits at most a second each time: a day ahead
// that could not be made is tried again at the next write, and only a
// missing partition of day itself fails the write.
func (s *Store) ensureDays(ctx context.Context, day int32) error {
	for d := day; d <= day+daysAhead; d++ {
		s.mu.Lock()
		done := s.days[d]
		s.mu.Unlock()
		if done {
			continue
		}
		if err := s.makeDay(ctx, d); err != nil {
			if d == day {
				return fmt.Errorf("central store: making the partitions of day %d: %w", d, err)
			}
			s.log.Debug("making a day's partitions ahead failed; trying again later", "day", d, "error", err)
			return nil
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

// makeDay makes day's partition of each partitioned table.
func (s *Store) makeDay(ctx context.Context, day int32) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
			return err
		}
		for _, t := range partitioned {
			q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s_d%d PARTITION OF %s FOR VALUES FROM (%d) TO (%d)`, t, day, t, day, day+1)
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}
