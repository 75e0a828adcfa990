package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchOtelcol starts the OpenTelemetry Collector of test/otelcol (built
// into the user's cache as record/sink's tests build it: the same name, so
// either reuses the other's) with its otlp receiver on a loopback port and
// the file exporter into a temporary directory, and returns the
// receiver's endpoint; the benchmark's end kills the pid it started. A
// failed build fails the benchmark under CI=true and skips it elsewhere.
func benchOtelcol(b *testing.B) string {
	b.Helper()
	bin, err := buildBenchOtelcol()
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("building the test collector: %v", err)
		}
		b.Skipf("building the test collector (test/otelcol) failed, and CI is not set: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	conf := fmt.Sprintf("receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: %s\n"+
		"exporters:\n  file:\n    path: %s\n    format: json\n    rotation:\n      max_megabytes: 4096\n"+
		"service:\n  telemetry:\n    logs:\n      level: warn\n    metrics:\n      level: none\n"+
		"  pipelines:\n    logs:\n      receivers: [otlp]\n      exporters: [file]\n", addr, filepath.Join(dir, "logs.json"))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("the collector did not listen on %s", addr)
		}
	}
}

func buildBenchOtelcol() (string, error) {
	src, err := filepath.Abs(filepath.Join("..", "otelcol"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
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
	if out, err := exec.Command("go", "build", "-C", src, "-o", tmp, ".").CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build -C %s: %v\n%s", src, err, out)
	}
	return bin, os.Rename(tmp, bin)
}
