// Package sinktest runs the real receivers that the sinks' tests and
// benchmarks send to, each on loopback and killed by the pid it started:
// the OpenTelemetry Collector of test/otelcol (a module of its own: the
// otlp receiver and the file exporter), built once into the user's cache
// under the hash of its go.mod, go.sum and main.go; Debian's rsyslogd over
// TLS, with a test CA (WriteCerts); nats-server with JetStream, in
// process (StartNATS); and a JetStream cluster of nats-server processes
// (StartNATSCluster), the nats-server of the version go.mod requires,
// built once into the user's cache under that version.
package sinktest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cachedBuild is a binary built once per test process into the user's
// cache, under a name that says what it was built from.
type cachedBuild struct {
	what  string // for messages: "the test collector (test/otelcol)"
	build func() (string, error)
	once  sync.Once
	bin   string
	err   error
}

var collectorBuild = &cachedBuild{what: "the test collector (test/otelcol)", build: buildCollector}

// binary returns the built binary. A failed build fails tb under CI=true
// and skips it, saying why, elsewhere.
func (b *cachedBuild) binary(tb testing.TB) string {
	tb.Helper()
	b.once.Do(func() { b.bin, b.err = b.build() })
	if b.err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("building %s: %v", b.what, b.err)
		}
		tb.Skipf("building %s failed, and CI is not set: %v", b.what, b.err)
	}
	return b.bin
}

// cachePath is the path of the binary name in the user's cache.
func cachePath(name string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "sandtrail-test", name), nil
}

// goBuild builds bin, unless it is there, with go build -C dir -o bin
// args..., through a temporary name, so that a failed or concurrent
// build leaves no half binary.
func goBuild(bin, dir string, args ...string) error {
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	t0 := time.Now()
	out, err := exec.Command("go", append([]string{"build", "-C", dir, "-o", tmp}, args...)...).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build -C %s %s: %v\n%s", dir, strings.Join(args, " "), err, out)
	}
	fmt.Fprintf(os.Stderr, "built %s in %s\n", bin, time.Since(t0).Round(100*time.Millisecond))
	return os.Rename(tmp, bin)
}

// collectorSource is test/otelcol, found from this file's place in the
// repository, so any package's tests find it.
func collectorSource() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("locating sinktest's source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "test", "otelcol"), nil
}

func buildCollector() (string, error) {
	src, err := collectorSource()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	bin, err := cachePath("otelcol-" + hex.EncodeToString(h.Sum(nil))[:16])
	if err != nil {
		return "", err
	}
	return bin, goBuild(bin, src, ".")
}

// collectorConfig: the otlp receiver (http only) on the port, the file
// exporter writing each export straight to the file (rotation set, so the
// exporter keeps no buffer of its own: what it acked is in the file, and
// a SIGKILL loses none of it), the collector's own telemetry off.
const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    format: json
    rotation:
      max_megabytes: 4096
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
`

// Collector is a collector process a test started, on a fixed loopback
// port: each start writes its own file of exports (Files).
type Collector struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	runs int
}

// StartCollector starts a collector on a free loopback port; the end of
// tb kills it.
func StartCollector(tb testing.TB) *Collector {
	tb.Helper()
	c := &Collector{tb: tb, bin: collectorBuild.binary(tb), dir: tb.TempDir(), port: freePort(tb)}
	c.Start()
	tb.Cleanup(c.Kill)
	return c
}

func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Endpoint is the otlp receiver's base URL.
func (c *Collector) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(c.port) }

// Start starts the collector (again, after Kill) and waits until its
// receiver listens.
func (c *Collector) Start() {
	c.tb.Helper()
	c.runs++
	cfg := filepath.Join(c.dir, fmt.Sprintf("config-%d.yaml", c.runs))
	out := filepath.Join(c.dir, fmt.Sprintf("logs-%d.json", c.runs))
	if err := os.WriteFile(cfg, fmt.Appendf(nil, collectorConfig, c.port, out), 0o600); err != nil {
		c.tb.Fatal(err)
	}
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("collector-%d.log", c.runs)))
	if err != nil {
		c.tb.Fatal(err)
	}
	defer log.Close()
	c.cmd = exec.Command(c.bin, "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		c.tb.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			c.tb.Fatalf("the collector did not listen on %d: %v\n%s", c.port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the pid Start started, and reaps it.
func (c *Collector) Kill() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.cmd = nil
}

// Files are the files of exports of each start so far, oldest first: one
// OTLP JSON export request a line.
func (c *Collector) Files() []string {
	var files []string
	for n := 1; n <= c.runs; n++ {
		files = append(files, filepath.Join(c.dir, fmt.Sprintf("logs-%d.json", n)))
	}
	return files
}
