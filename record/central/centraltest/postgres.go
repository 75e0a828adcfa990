// Package centraltest runs the real PostgreSQL server that the central
// store's tests, the scale-out end-to-end test and the benchmarks use:
// Debian's PostgreSQL 15 (initdb and postgres, of the package
// postgresql-15) in a scratch cluster of its own, listening only on a free
// port of 127.0.0.1 and on a unix socket in its directory, trusting local
// and 127.0.0.1 connections, with a superuser role and a database both
// named sandtrail. PostgreSQL refuses to run as root: run as root, the
// server runs as Debian's postgres user. The end of the test stops it by
// the pid it started (a fast shutdown, then SIGKILL to its process group)
// and removes the cluster.
package centraltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sandtrail/sandtrail/record/internal/proctest"
)

const (
	// role is the superuser, and the database every DSN names by default.
	role = "sandtrail"
	// readyTimeout bounds a start, stopTimeout the fast shutdown.
	readyTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	// serverPackage is the Debian package of the server binaries.
	serverPackage = "postgresql-15"
)

// Postgres is a PostgreSQL server a test started.
type Postgres struct {
	dir  string // the scratch directory: data/, the socket, the logs
	bin  string // the directory of initdb and postgres
	cred *syscall.Credential
	port int
	cmd  *exec.Cmd
	// exited is closed once the server has been reaped.
	exited <-chan struct{}
	stop   sync.Once
}

// Option sets how StartPostgres runs the server.
type Option func(*config)

type config struct {
	settings []string // name=value, for postgres -c, later ones winning
}

// WithSetting passes a server setting (postgres -c name=value), such as
// shared_buffers or synchronous_commit for a benchmark; it overrides the
// defaults (fsync=on, no logging collector).
func WithSetting(name, value string) Option {
	return func(c *config) { c.settings = append(c.settings, name+"="+value) }
}

// StartPostgres initialises a scratch cluster, starts the server and
// waits, at most 30 s, until it accepts connections; it creates the
// database sandtrail. Without the binaries of postgresql-15 it fails tb
// under CI=true (scripts/deps.sh test installs them) and skips it
// elsewhere. The end of tb stops the server and removes the cluster.
func StartPostgres(tb testing.TB, opts ...Option) *Postgres {
	tb.Helper()
	cfg := config{settings: []string{"fsync=on", "logging_collector=off"}}
	for _, o := range opts {
		o(&cfg)
	}
	p := &Postgres{bin: serverBinaries(tb), cred: serverCredential(tb)}
	// Its own directory, not tb.TempDir: the postgres user must reach it
	// (the testing package's directories are root's, mode 0700), and the
	// socket's path must stay short.
	dir, err := os.MkdirTemp("", "sandtrail-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	p.dir = dir
	tb.Cleanup(func() {
		p.Stop()
		os.RemoveAll(dir)
	})
	if p.cred != nil {
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	t0 := time.Now()
	if err := p.initdb(); err != nil {
		tb.Fatal(err)
	}
	t1 := time.Now()
	if err := p.start(cfg.settings); err != nil {
		tb.Fatalf("starting postgres: %v\nthe server's log ends:\n%s", err, p.LogTail())
	}
	tb.Logf("postgres on 127.0.0.1:%d: initdb %s, ready %s later", p.port,
		t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if err := p.exec("postgres", "CREATE DATABASE "+role); err != nil {
		tb.Fatal(err)
	}
	return p
}

// serverBinaries returns the directory of initdb and postgres: pg_config
// --bindir's, else Debian's for PostgreSQL 15.
func serverBinaries(tb testing.TB) string {
	tb.Helper()
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	dirs = append(dirs, "/usr/lib/postgresql/15/bin")
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d
		}
	}
	missing(tb, "the PostgreSQL server binaries (initdb, postgres) are in none of %s: install the Debian package %s (scripts/deps.sh test does)", strings.Join(dirs, ", "), serverPackage)
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential is nil unless the test runs as root; then it is the
// postgres user's, whom Debian's postgresql-15 creates.
func serverCredential(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		missing(tb, "PostgreSQL does not run as root, and the user postgres, whom the Debian package %s creates, is missing: %v", serverPackage, err)
		return nil
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		tb.Fatal(err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		tb.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// missing fails tb under CI=true, where scripts/deps.sh has installed
// what is missing, and skips it elsewhere.
func missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format+" (CI is not set, so the test is skipped)", args...)
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }
func (p *Postgres) log() string  { return filepath.Join(p.dir, "server.log") }

// initdb creates the cluster, with the bootstrap superuser named
// sandtrail, and trusts local and 127.0.0.1 connections. It does not sync
// the new files to disk (the cluster is scratch), but the server runs
// with fsync on.
func (p *Postgres) initdb() error {
	cmd := exec.Command(filepath.Join(p.bin, "initdb"), "-D", p.data(), "-U", role,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("running initdb: %v\n%s", err, out)
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	return os.WriteFile(filepath.Join(p.data(), "pg_hba.conf"), []byte(hba), 0o600)
}

// start starts the server on a free port and waits until it takes
// connections. A port taken between its choice and the server's bind is
// chosen again, a few times.
func (p *Postgres) start(settings []string) error {
	var err error
	for range 3 {
		if p.port, err = freePort(); err != nil {
			return err
		}
		if err = p.launch(settings); err != nil {
			return err
		}
		err = p.waitReady()
		if !errors.Is(err, errExited) || !strings.Contains(p.LogTail(), "could not bind") {
			return err
		}
	}
	return err
}

// launch starts postgres in its own process group, its output appended
// to server.log.
func (p *Postgres) launch(settings []string) error {
	log, err := os.OpenFile(p.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"-D", p.data(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(p.port),
		"-c", "unix_socket_directories=" + p.dir}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), args...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	exited, err := proctest.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// waitReady polls with a connection until the server takes one, it exits,
// or readyTimeout passes.
func (p *Postgres) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, p.DSNFor("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v) before taking connections on 127.0.0.1:%d", errExited, p.cmd.ProcessState, p.port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres took no connection on 127.0.0.1:%d within %s: %w", p.port, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exec runs one statement in database db.
func (p *Postgres) exec(db, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSNFor(db))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", db, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("running %q in %s: %w", sql, db, err)
	}
	return nil
}

// DSN is the URL of the database sandtrail, as the role sandtrail, over
// TCP without TLS.
func (p *Postgres) DSN() string { return p.DSNFor(role) }

// DSNFor is the URL of database db, like DSN's.
func (p *Postgres) DSNFor(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", role, p.port, url.PathEscape(db))
}

// Port is the server's TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// CreateDatabase creates an empty database name, for a test of its own,
// and returns its DSN.
func (p *Postgres) CreateDatabase(tb testing.TB, name string) string {
	tb.Helper()
	if err := p.exec("postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	return p.DSNFor(name)
}

// Stop shuts the server down: SIGINT (a fast shutdown: it rolls back open
// transactions and ends every connection) to the pid it started, and,
// after 10 s without its exit, SIGKILL to its process group. Its backends,
// each in a session of its own, end when they see the server gone. Stop
// is idempotent, and runs at the end of the test.
func (p *Postgres) Stop() {
	p.stop.Do(func() {
		if p.cmd == nil {
			return
		}
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			proctest.KillGroup(p.cmd, p.exited)
		}
	})
}

// LogTail is the end of the server's log, for a failure's message.
func (p *Postgres) LogTail() string {
	b, err := os.ReadFile(p.log())
	if err != nil {
		return err.Error()
	}
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

var errExited = errors.New("centraltest: postgres exited")

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choosing a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
