package kernels_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// kernel is one of Debian's cloud kernels that the matrix boots.
type kernel struct {
	suite  string // Debian's suite: its cloud kernel is linux-image-cloud-amd64/SUITE
	series string // the kernel's series, as docs/kernels.md names it
	// records is set when the collector must record there; otherwise it
	// must refuse to start with one line that names what is missing.
	records bool
}

var matrix = []kernel{
	{suite: "bullseye", series: "5.10"},
	{suite: "bookworm", series: "6.1", records: true},
	{suite: "trixie", series: "6.12", records: true},
}

// bootResult is what one boot printed: smoke.sh's "kernels: NAME VALUE"
// lines, by name (a repeated name keeps every value), and the console.
type bootResult struct {
	lines   map[string][]string
	console string
}

func (b *bootResult) value(name string) string {
	if v := b.lines[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// counts returns the "count KIND FLAGS = N" lines as KIND -> N.
func (b *bootResult) counts() map[string]int {
	out := map[string]int{}
	for _, v := range b.lines["count"] {
		kind, rest, _ := strings.Cut(v, " ")
		_, n, ok := strings.Cut(rest, "= ")
		if !ok {
			continue
		}
		c, err := strconv.Atoi(strings.TrimSpace(n))
		if err == nil {
			out[kind] = c
		}
	}
	return out
}

// doctorKernel decodes what `sandtrail doctor --format json` printed.
func doctorKernel(t *testing.T, raw string) *event.Kernel {
	t.Helper()
	var doc struct {
		Kernel *event.Kernel `json:"kernel"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || doc.Kernel == nil {
		t.Fatalf("doctor --format json printed no kernel (%v):\n%s", err, raw)
	}
	return doc.Kernel
}

// TestKernelMatrix boots each kernel of matrix under qemu (software
// emulation) with the sandtrail binaries of this checkout, runs smoke.sh in
// it and checks what it recorded; then it checks that docs/kernels.md's
// table is the one these kernels and this machine's produce. It needs root,
// qemu-system-x86_64 and busybox (make deps installs them); in CI their
// absence is a failure. SANDTRAIL_KERNELS_UPDATE=1 rewrites the table.
func TestKernelMatrix(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the matrix boots Debian's amd64 kernels")
	}
	need := func(what string, ok bool) {
		if ok {
			return
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; make deps installs what the kernel matrix needs", what)
		}
		t.Skipf("skipping: %s", what)
	}
	need("not root", os.Geteuid() == 0)
	_, err := exec.LookPath("qemu-system-x86_64")
	need("qemu-system-x86_64 is not on PATH", err == nil)
	_, err = os.Stat("/bin/busybox")
	need("/bin/busybox is missing (busybox-static)", err == nil)

	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(here, "..", "..")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/sandtrail", "./cmd/sandtrail-shim")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building static binaries: %v\n%s", err, out)
	}

	cache := os.Getenv("SANDTRAIL_KERNELS_CACHE")
	if cache == "" {
		cache = "/var/cache/sandtrail-kernels"
	}
	var suites []string
	for _, k := range matrix {
		suites = append(suites, k.suite)
	}
	fetch := exec.Command(filepath.Join(here, "fetch.sh"), append([]string{cache}, suites...)...)
	if out, err := fetch.CombinedOutput(); err != nil {
		t.Fatalf("fetching kernels: %v\n%s", err, out)
	}

	results := make([]*bootResult, len(matrix))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 2) // one qemu per core
	for i, k := range matrix {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i] = boot(t, here, filepath.Join(cache, k.suite), bin)
		}()
	}
	wg.Wait()

	rows := []tableRow{}
	for i, k := range matrix {
		r := results[i]
		if r == nil {
			continue
		}
		t.Run(k.series, func(t *testing.T) {
			if k.records {
				checkRecords(t, r)
			} else {
				checkRefuses(t, r)
			}
			if t.Failed() {
				t.Logf("console of the %s boot:\n%s", k.series, r.console)
			}
		})
		rows = append(rows, tableRow{series: k.series, distro: "Debian " + k.suite, kernel: doctorKernel(t, r.value("doctor-json"))})
	}
	host := exec.Command(filepath.Join(bin, "sandtrail"), "doctor", "--format", "json")
	out, _ := host.Output()
	rows = append(rows, tableRow{series: hostSeries(), distro: hostDistro, kernel: doctorKernel(t, string(out))})
	checkTable(t, filepath.Join(root, "docs", "kernels.md"), rows)
}

// boot runs boot.sh for the kernel in dir and parses its console.
func boot(t *testing.T, here, dir, bin string) *bootResult {
	log := filepath.Join(t.TempDir(), "console.log")
	cmd := exec.Command(filepath.Join(here, "boot.sh"), dir, bin, log)
	out, err := cmd.CombinedOutput()
	console, _ := os.ReadFile(log)
	r := &bootResult{lines: map[string][]string{}, console: string(console)}
	if err != nil {
		t.Errorf("booting %s: %v\n%s\nconsole:\n%s", dir, err, out, console)
		return r
	}
	sc := bufio.NewScanner(bytes.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "kernels: ")
		if !ok {
			continue
		}
		name, value, _ := strings.Cut(rest, " ")
		r.lines[name] = append(r.lines[name], value)
	}
	return r
}

// checkRecords checks a kernel where the collector must record the smoke
// session: each kind of event, the capabilities in the record equal to
// doctor's, and a journal that verifies.
func checkRecords(t *testing.T, r *bootResult) {
	if r.value("doctor-exit") != "0" {
		t.Errorf("doctor exited %s, want 0: %s", r.value("doctor-exit"), r.value("doctor-stderr"))
	}
	if r.value("run-exit") != "0" {
		t.Errorf("run exited %s, want 0; its stderr: %s", r.value("run-exit"), r.value("run-stderr"))
	}
	want := map[string]int{
		event.KindCapabilities: 1, event.KindSessionStart: 1, event.KindSessionTerminate: 1,
		// true, cat, nc, nslookup and the sleeps that the pids limit let
		// start.
		event.KindExec: 5, event.KindFork: 5, event.KindExit: 5,
		event.KindFileRead: 1, event.KindFileCreate: 1,
		// nc's TCP connect and nslookup's UDP one.
		event.KindNetConnect: 2, event.KindNetDNS: 1, event.KindLimitHit: 1,
		// logger's connect to /dev/log: by the cgroup hook, or from the
		// syscall where the kernel has none.
		"unix-connect": 1,
	}
	got := r.counts()
	for kind, n := range want {
		if got[kind] < n {
			t.Errorf("%s: %d recorded, want at least %d", kind, got[kind], n)
		}
	}
	// The exec of a copy of busybox in the session's /tmp (an overlay)
	// names the inode that stat shows there, in the kernel or from
	// /proc/PID/exe.
	if f := strings.Fields(r.value("overlay-ino")); len(f) != 2 || f[0] != f[1] {
		t.Errorf("exec from the private /tmp: stat's inode and the recorded exe_ino differ: %q", r.value("overlay-ino"))
	}
	if r.value("verify-exit") != "0" {
		t.Errorf("verify exited %s, want 0", r.value("verify-exit"))
	}
	var ev event.Event
	if err := json.Unmarshal([]byte(r.value("capabilities-json")), &ev); err != nil || ev.Kernel == nil {
		t.Fatalf("the record's collector.capabilities does not decode (%v): %s", err, r.value("capabilities-json"))
	}
	doc := doctorKernel(t, r.value("doctor-json"))
	if a, b := haves(ev.Kernel), haves(doc); a != b {
		t.Errorf("the record's capabilities %s differ from doctor's %s", a, b)
	}
}

// checkRefuses checks a kernel too old for the collector: run and doctor
// fail, run with one line that names the missing features and the Linux
// that has them, never a verifier log.
func checkRefuses(t *testing.T, r *bootResult) {
	if r.value("run-exit") == "0" {
		t.Errorf("run exited 0 on a kernel the collector cannot run on")
	}
	if r.value("doctor-exit") == "0" {
		t.Errorf("doctor exited 0 on a kernel the collector cannot run on")
	}
	lines := strings.Split(strings.Trim(r.value("run-stderr"), "|"), "|")
	if len(lines) != 1 {
		t.Errorf("run printed %d lines on stderr, want one: %q", len(lines), lines)
	}
	if !regexp.MustCompile(`needs Linux 5\.17 or newer.*bpf_loop \(Linux 5\.17\)`).MatchString(lines[0]) {
		t.Errorf("run's refusal does not name bpf_loop and Linux 5.17: %q", lines[0])
	}
}

// haves is k's capabilities as "name=yes,name=no,…".
func haves(k *event.Kernel) string {
	var b strings.Builder
	for _, c := range k.Capabilities {
		fmt.Fprintf(&b, "%s=%t,", c.Name, c.Have)
	}
	return b.String()
}

// hostSeries is this machine's kernel series ("6.18").
func hostSeries() string {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		return "host"
	}
	m := regexp.MustCompile(`^\d+\.\d+`).FindString(string(out))
	if m == "" {
		return "host"
	}
	return m
}

// tableRow is one kernel of docs/kernels.md's table.
// hostDistro names this machine's column of the table.
const hostDistro = "this machine"

type tableRow struct {
	series, distro string
	kernel         *event.Kernel
}

// The markers around the table in docs/kernels.md.
const (
	tableBegin = "<!-- kernel matrix: made by TestKernelMatrix (SANDTRAIL_KERNELS_UPDATE=1); do not edit -->"
	tableEnd   = "<!-- end of the kernel matrix -->"
)

// table renders rows as docs/kernels.md's table: a kernel per column, a
// capability per row.
func table(rows []tableRow) string {
	var b strings.Builder
	b.WriteString("| capability |")
	for _, r := range rows {
		fmt.Fprintf(&b, " %s (%s) |", r.series, r.distro)
	}
	b.WriteString("\n|---|")
	for range rows {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, name := range event.Capabilities {
		since := ""
		for _, r := range rows {
			for _, c := range r.kernel.Capabilities {
				if c.Name == name {
					since = c.Since
				}
			}
		}
		fmt.Fprintf(&b, "| `%s` (Linux %s) |", name, since)
		for _, r := range rows {
			cell := "?"
			for _, c := range r.kernel.Capabilities {
				if c.Name == name {
					cell = "no"
					if c.Have {
						cell = "yes"
					}
					if !c.Have && c.Required {
						cell = "**no** (required)"
					}
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("| release |")
	for _, r := range rows {
		rel := r.kernel.Release
		if r.distro == hostDistro {
			// This machine's build differs from one machine of its kind
			// to the next (6.18.44-fc-v669, -v1098): the series says it.
			rel = r.series + ".x"
		}
		fmt.Fprintf(&b, " %s |", rel)
	}
	b.WriteString("\n")
	return b.String()
}

// checkTable compares docs/kernels.md's table with the one rows make, or
// rewrites it under SANDTRAIL_KERNELS_UPDATE=1.
func checkTable(t *testing.T, path string, rows []tableRow) {
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no kernel matrix between %q and %q", path, tableBegin, tableEnd)
	}
	want := table(rows)
	got := s[i+len(tableBegin)+1 : j]
	if got == want {
		return
	}
	if os.Getenv("SANDTRAIL_KERNELS_UPDATE") == "1" {
		s = s[:i+len(tableBegin)+1] + want + s[j:]
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the kernel matrix of %s", path)
		return
	}
	t.Errorf("%s's kernel matrix is not what the kernels say (SANDTRAIL_KERNELS_UPDATE=1 rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
}
