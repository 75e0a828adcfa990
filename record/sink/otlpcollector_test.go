package sink

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The OpenTelemetry Collector of the tests: test/otelcol, a module of its
// own (the otlp receiver and the file exporter), built once into the
// user's cache under the hash of its go.mod, go.sum and main.go.

var (
	otelcolOnce sync.Once
	otelcolBin  string
	otelcolErr  error
)

// otelcolBinary returns the built collector. A failed build fails the test
// under CI=true and skips it, saying why, elsewhere.
func otelcolBinary(t *testing.T) string {
	t.Helper()
	otelcolOnce.Do(func() { otelcolBin, otelcolErr = buildOtelcol() })
	if otelcolErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("building the test collector: %v", otelcolErr)
		}
		t.Skipf("building the test collector (test/otelcol) failed, and CI is not set: %v", otelcolErr)
	}
	return otelcolBin
}

func buildOtelcol() (string, error) {
	src, err := filepath.Abs(filepath.Join("..", "..", "test", "otelcol"))
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
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "sandtrail-test", "otelcol-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	t0 := time.Now()
	out, err := exec.Command("go", "build", "-C", src, "-o", tmp, ".").CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build -C %s: %v\n%s", src, err, out)
	}
	fmt.Fprintf(os.Stderr, "built the test collector in %s: %s\n", time.Since(t0).Round(time.Second), bin)
	return bin, os.Rename(tmp, bin)
}

// otelcolConfig: the otlp receiver (http only) on the port, the file
// exporter writing each export straight to the file (rotation set, so the
// exporter keeps no buffer of its own: what it acked is in the file, and
// a SIGKILL loses none of it), the collector's own telemetry off.
const otelcolConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    format: json
    rotation:
      max_megabytes: 1024
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

// otelcol is a collector process the test started, on a fixed port: each
// start writes its own file, logs-<n>.json.
type otelcol struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	runs int
}

// startOtelcol starts a collector on a free loopback port; the test's
// end kills it.
func startOtelcol(t *testing.T) *otelcol {
	t.Helper()
	c := &otelcol{t: t, bin: otelcolBinary(t), dir: t.TempDir(), port: freePort(t)}
	c.start()
	t.Cleanup(c.kill)
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *otelcol) endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(c.port) }

// start starts the collector and waits until its receiver listens.
func (c *otelcol) start() {
	c.t.Helper()
	c.runs++
	cfg := filepath.Join(c.dir, fmt.Sprintf("config-%d.yaml", c.runs))
	out := filepath.Join(c.dir, fmt.Sprintf("logs-%d.json", c.runs))
	if err := os.WriteFile(cfg, fmt.Appendf(nil, otelcolConfig, c.port, out), 0o600); err != nil {
		c.t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("collector-%d.log", c.runs)))
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	c.cmd = exec.Command(c.bin, "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
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
			c.t.Fatalf("the collector did not listen on %d: %v\n%s", c.port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to the pid the test started, and reaps it.
func (c *otelcol) kill() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.cmd = nil
}

// otlpRecord is a log record as the file exporter writes it.
type otlpRecord struct {
	Host string
	otlpLogRecord
}

// attr is the record's attribute k: its string or int value.
func (r otlpRecord) attr(k string) string {
	for _, a := range r.Attributes {
		if a.Key == k {
			if a.Value.StringValue != nil {
				return *a.Value.StringValue
			}
			return a.Value.IntValue
		}
	}
	return ""
}

// records reads every log record of every file the collector wrote.
func (c *otelcol) records() []otlpRecord {
	c.t.Helper()
	var out []otlpRecord
	for n := 1; n <= c.runs; n++ {
		f, err := os.Open(filepath.Join(c.dir, fmt.Sprintf("logs-%d.json", n)))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			out = append(out, decodeExport(c.t, sc.Bytes())...)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			c.t.Fatal(err)
		}
	}
	return out
}

func decodeExport(t *testing.T, line []byte) []otlpRecord {
	t.Helper()
	var req struct {
		ResourceLogs []struct {
			Resource struct {
				Attributes []otlpKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeLogs []struct {
				LogRecords []otlpLogRecord `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		t.Fatalf("the file exporter's line: %v: %.200s", err, line)
	}
	var out []otlpRecord
	for _, rl := range req.ResourceLogs {
		res := otlpRecord{otlpLogRecord: otlpLogRecord{Attributes: rl.Resource.Attributes}}
		if res.attr("service.name") != "sandtrail" {
			t.Errorf("resource service.name = %q, want sandtrail", res.attr("service.name"))
		}
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				out = append(out, otlpRecord{Host: res.attr("host.name"), otlpLogRecord: lr})
			}
		}
	}
	return out
}
