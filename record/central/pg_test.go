package central_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

var dbs atomic.Int64

// newDatabase returns the DSN of a fresh database.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := "postgres://sandtrail@127.0.0.1:55432/"
	name := fmt.Sprintf("t%d_%d", dbs.Add(1), os.Getpid())
	c, err := pgx.Connect(context.Background(), base+"postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return base + name + "?sslmode=disable"
}
