package central_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sandtrail/sandtrail/record/central/centraltest"
)

var dbs atomic.Int64

// newDatabase starts a PostgreSQL server for the test and returns the DSN
// of a fresh database in it.
func newDatabase(t *testing.T) string {
	t.Helper()
	pg := centraltest.StartPostgres(t)
	return pg.CreateDatabase(t, fmt.Sprintf("t%d", dbs.Add(1)))
}
