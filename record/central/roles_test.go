package central_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/central/centraltest"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/query"
)

// readerRoleSQL is the SQL block of docs/deployment.md marked
// reader-role.sql.
func readerRoleSQL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- reader-role.sql -->\n```sql\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/deployment.md has no reader-role.sql block")
	}
	return string(m[1])
}

// TestReaderRole runs the read-only role of docs/deployment.md: its member
// reads the store through the questions, the partitions made after the
// grants included, and can write nothing.
func TestReaderRole(t *testing.T) {
	ctx := context.Background()
	pg := centraltest.StartPostgres(t)
	admin, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{`CREATE ROLE sandtrail_aggregate LOGIN`, `ALTER DATABASE sandtrail OWNER TO sandtrail_aggregate`,
		`ALTER SCHEMA public OWNER TO sandtrail_aggregate`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	as := func(user string) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/sandtrail?sslmode=disable", user, pg.Port())
	}
	es := generated(t, indextest.Config{Sessions: 20, PerSession: 30, Seed: 7})
	day1 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, as("sandtrail_aggregate"), central.WithClock(func() time.Time { return day1 }))
	write(t, s, es[:300], 100)
	if _, err := admin.Exec(ctx, readerRoleSQL(t)); err != nil {
		t.Fatalf("the reader role's SQL: %v", err)
	}
	// The next days' partitions are made after the grants.
	s2 := openStore(t, as("sandtrail_aggregate"), central.WithClock(func() time.Time { return day1.Add(72 * time.Hour) }))
	write(t, s2, es[300:], 100)

	r, err := central.Open(ctx, as("alice"), central.ReadOnly())
	if err != nil {
		t.Fatalf("opening as the reader: %v", err)
	}
	defer r.Close()
	hits, err := r.Query(ctx, query.Filter{})
	if err != nil || len(hits) != len(es) {
		t.Fatalf("the reader's Query = %d events, %v; want %d", len(hits), err, len(es))
	}
	if ss, err := r.Sessions(ctx, query.Filter{}); err != nil || len(ss) != 20 {
		t.Fatalf("the reader's Sessions = %d, %v; want 20", len(ss), err)
	}
	alice, err := pgx.Connect(ctx, as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx)
	for _, q := range []string{`INSERT INTO sessions(session_id) VALUES('forged')`, `DELETE FROM events`, `UPDATE chains SET broken = NULL`,
		`CREATE TABLE x(a int)`} {
		if _, err := alice.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the reader's %q: %v, want permission denied", q, err)
		}
	}
	if _, err := central.Open(ctx, as("alice")); err == nil {
		t.Error("the reader opened the store for writing (migrations)")
	}
}
