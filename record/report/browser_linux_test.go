package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// chromium finds Debian's chromium (scripts/deps.sh test installs it); on
// CI its absence fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (scripts/deps.sh test installs it)")
	}
	t.Skip("skipping: chromium is not installed (scripts/deps.sh test)")
	return ""
}

// runChromium runs headless chromium on page with args, in a profile
// directory of its own, and returns its stdout.
func runChromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-default-apps", "--metrics-recording-only", "--no-default-browser-check"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestReportInBrowser renders the known session's page in headless
// Chromium and checks the DOM the browser built: the process tree (the
// hostile argv as text), the package rows, the alerts linked to their
// events, the timeline's bars; then saves a screenshot
// ($SANDTRAIL_ARTIFACTS, else the test's directory) and checks that it
// is a picture of something.
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, buildKnown(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(runChromium(t, bin, page, "--dump-dom"))
	checks := []struct {
		what string
		re   string
		n    int
	}{
		{"the collapsible nodes of the process tree (sh > npm > the install script)", `<details open[^>]*>\s*<summary class="proc">`, 2},
		{"the npm process, its hostile argv as text", `<b>101</b> npm install '&lt;script&gt;alert\(1\)&lt;/script&gt;'`, 1},
		{"no script element", `<script`, 0},
		{"package rows", `<tr class="package"`, 2},
		{"alert rows", `<tr class="alert"`, 3},
		{"links from the alert to its events", `<a href="#ref[89]">`, 2},
		{"the events the alert names", `<tr class="ref" id="ref[89]">`, 2},
		{"the timeline's process bars", `<rect class="proc"`, 2},
		{"the install script's bar", `<rect class="script"`, 1},
		{"the install script under its package", `<tr class="scripts">`, 1},
		{"the timeline's alert mark", `<rect class="alert"`, 1},
		{"the sensitive file", `<tr class="file sensitive"`, 1},
		{"the blocked destination", `<span class="badge blocked">1 blocked</span>`, 1},
		{"the journal status", `id="verify-status"`, 1},
	}
	for _, c := range checks {
		if got := len(regexp.MustCompile(c.re).FindAllString(dom, -1)); got != c.n {
			t.Errorf("%s: %d matches of %s in the DOM, want %d", c.what, got, c.re, c.n)
		}
	}
	out := os.Getenv("SANDTRAIL_ARTIFACTS")
	if out == "" {
		out = dir
	}
	shot := filepath.Join(out, "report.png")
	runChromium(t, bin, page, "--screenshot="+shot, "--window-size=1280,1800", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if b.Dx() != 1280 || len(colours) < 8 {
		t.Errorf("screenshot %v with %d colours: want 1280 wide and a page drawn", b, len(colours))
	}
	t.Logf("screenshot: %s", shot)
}
