package centraltest

import (
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPostgres starts a server (in a subtest, whose end stops it), uses
// it through pgx, and checks that the end of the test left neither a
// process it started nor its directory.
func TestPostgres(t *testing.T) {
	var p *Postgres
	var pids []int
	t.Run("server", func(t *testing.T) {
		p = StartPostgres(t, WithSetting("synchronous_commit", "off"))
		pids = serverPids(t, p)
		checkServer(t, p)
		checkCreateDatabase(t, p)
	})
	t.Run("setting", func(t *testing.T) {
		conn := connect(t, StartPostgres(t, WithSetting("fsync", "off")).DSN())
		if got := query(t, conn, "SHOW fsync"); got != "off" {
			t.Errorf("with WithSetting(fsync, off), SHOW fsync = %q, want off", got)
		}
	})
	if p == nil {
		return
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("after the test, kill(%d, 0) = %v, want ESRCH: a server process outlived it", pid, err)
		}
	}
	if _, err := os.Stat(p.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the test, stat %s = %v, want it removed", p.dir, err)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// query returns the one text value sql selects.
func query(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func checkServer(t *testing.T, p *Postgres) {
	conn := connect(t, p.DSN())
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v; want 1", one, err)
	}
	for sql, want := range map[string]string{
		"SELECT current_database()": "sandtrail",
		"SELECT current_user":       "sandtrail",
		"SELECT rolsuper::text FROM pg_roles WHERE rolname = 'sandtrail'": "true",
		"SHOW fsync":              "on",
		"SHOW synchronous_commit": "off",
		"SHOW listen_addresses":   "127.0.0.1",
		"SHOW port":               strconv.Itoa(p.Port()),
		"SHOW server_version_num": "15",
	} {
		if got := query(t, conn, sql); got != want && !(sql == "SHOW server_version_num" && strings.HasPrefix(got, want)) {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE events (seq bigint PRIMARY KEY, kind text NOT NULL)",
		"INSERT INTO events VALUES (1, 'exec'), (2, 'exit')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if got := query(t, conn, "SELECT string_agg(kind, ',' ORDER BY seq) FROM events"); got != "exec,exit" {
		t.Errorf("the table's kinds = %q, want exec,exit", got)
	}
	if p.LogTail() == "" {
		t.Error("LogTail() is empty: the server's log is not where it is read")
	}
}

// checkCreateDatabase checks that a database of CreateDatabase's is new
// and apart from sandtrail's.
func checkCreateDatabase(t *testing.T, p *Postgres) {
	dsn := p.CreateDatabase(t, "isolated")
	if want := p.DSNFor("isolated"); dsn != want {
		t.Errorf("CreateDatabase = %q, want %q", dsn, want)
	}
	conn := connect(t, dsn)
	if got := query(t, conn, "SELECT current_database()"); got != "isolated" {
		t.Errorf("current_database() = %q, want isolated", got)
	}
	if got := query(t, conn, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'events'"); got != "0" {
		t.Errorf("the new database has %s tables named events, want 0", got)
	}
}

// serverPids returns the server's pid and its children's, after
// checking that it runs as the postgres user when the test runs as root.
func serverPids(t *testing.T, p *Postgres) []int {
	pid := p.cmd.Process.Pid
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "\nUid:\t"+u.Uid+"\t") {
			t.Errorf("the server does not run as postgres (uid %s):\n%s", u.Uid, status)
		}
	}
	pids := []int{pid}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Logf("cannot list the server's children: %v", err)
		return pids
	}
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	if len(pids) < 2 {
		t.Errorf("the server has no child processes (%s), want its checkpointer, writer and the rest", b)
	}
	return pids
}
