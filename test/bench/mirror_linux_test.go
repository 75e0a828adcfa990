package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// The mirror benchmarks compare sandtrail's mirror with nginx serving the
// same files (the limit: no verification, no policy, no record) and with
// Verdaccio 6 as a warm pull-through, all on loopback, all in front of the
// same fixture upstream (a tree of mirrorTree packages, and the real
// packuments of testdata/packuments). Each server runs in a process of
// its own. The installs of one round run one after the other in a
// rotating order, and the result is the median over rounds.

// mirrorTree is the size of the benchmark's package tree.
const mirrorTree = 200

// registry is one server under test.
type registry struct {
	name string
	url  string // the npm registry URL, ending in /
	stop func()
}

// startSandtrailMirror builds sandtrail (or takes the binary
// SANDTRAIL_BENCH_SANDTRAIL names: another build, to compare) and runs
// `sandtrail mirror` with its own data directory in front of up. Its
// policy approves up, the registries named in tarballs (where the
// fixture's tarballs are), and the public registry (where the real
// packuments' are), and has a 3-day cooldown, which the newest versions
// of the real packuments are inside.
func startSandtrailMirror(b *testing.B, up string, tarballs ...string) registry {
	b.Helper()
	dir := b.TempDir()
	bin := os.Getenv("SANDTRAIL_BENCH_SANDTRAIL")
	if bin == "" {
		bin = filepath.Join(dir, "sandtrail")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
			b.Fatalf("building sandtrail: %v\n%s", err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(bin, "--data", data, "keys", "generate").CombinedOutput(); err != nil {
		b.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}
	pol := filepath.Join(dir, "policy.yaml")
	os.WriteFile(pol, []byte("sources:\n  registries:\n    npm: ["+strings.Join(append([]string{up}, tarballs...), "/, ")+
		"/, https://registry.npmjs.org/]\ncooldown:\n  min_age: 3d\n"), 0o644)
	addr := freePort(b)
	cmd := exec.Command(bin, "--data", data, "--log-level", "warn", "mirror", "--listen", addr, "--upstream", "npm="+up+"/", "--policy", pol)
	cmd.Stderr = os.Stderr
	return startServer(b, "sandtrail", "http://"+addr+"/npm/", addr, cmd)
}

// startVerdaccio runs Verdaccio 6 (installed by scripts/deps.sh bench
// under test/bench/results/verdaccio) as a pull-through of up.
func startVerdaccio(b *testing.B, up string) registry {
	b.Helper()
	bin, err := filepath.Abs("results/verdaccio/node_modules/verdaccio/bin/verdaccio")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		b.Skipf("skipping: Verdaccio is not installed (scripts/deps.sh bench): %v", err)
	}
	dir := b.TempDir()
	addr := freePort(b)
	cfg := fmt.Sprintf("storage: %s/storage\nuplinks:\n  up:\n    url: %s/\n    cache: true\npackages:\n  '**':\n    access: $all\n    proxy: up\nlisten: %s\nlog: {type: stdout, format: pretty, level: fatal}\nmax_body_size: 100mb\n",
		dir, up, addr)
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644)
	cmd := exec.Command("node", bin, "-c", filepath.Join(dir, "config.yaml"))
	return startServer(b, "verdaccio", "http://"+addr+"/", addr, cmd)
}

// startNginx serves the files of root (dumped from a warm server by
// dumpRegistry) with nginx on addr.
func startNginx(b testing.TB, root, addr string) registry {
	b.Helper()
	ngx, err := exec.LookPath("nginx")
	if err != nil {
		b.Skip("skipping: nginx is not installed (scripts/deps.sh bench)")
	}
	dir := b.TempDir()
	conf := fmt.Sprintf(`daemon off; user root; worker_processes 2; error_log %[1]s/error.log crit; pid %[1]s/nginx.pid;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000; client_body_temp_path %[1]s;
  proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen %[2]s; root %[3]s; default_type application/octet-stream;
    location / { try_files $uri/index.json $uri =404; }
    location ~ /index\.json$ { default_type application/json; } } }
`, dir, addr, root)
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644)
	cmd := exec.Command(ngx, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	return startServer(b, "nginx", "http://"+addr+"/npm/", addr, cmd)
}

// dumpRegistry writes what the warm server at from serves for the tree
// and the real packuments, as files for nginx at host: each abbreviated
// packument (what npm and the throughput benchmark ask for, with its
// tarball URLs on host) as npm/<name>/index.json, each tarball of the tree
// at its path.
func dumpRegistry(b *testing.B, from registry, host string, n int, real []realPackument) string {
	b.Helper()
	root := b.TempDir()
	get := func(url, hostHeader, accept string) []byte {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = hostHeader
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
		return body
	}
	packument := func(name string) {
		dst := filepath.Join(root, "npm", name)
		os.MkdirAll(filepath.Join(dst, "-"), 0o755)
		os.WriteFile(filepath.Join(dst, "index.json"), get(from.url+name, host, abbreviatedPackument), 0o644)
	}
	for i := range n {
		name := fmt.Sprintf("pkg-%d", i)
		packument(name)
		tgz := name + "-1.0.0.tgz"
		os.WriteFile(filepath.Join(root, "npm", name, "-", tgz), get(from.url+name+"/-/"+tgz, host, ""), 0o644)
	}
	for _, p := range real {
		packument(p.name)
	}
	return root
}

// abbreviatedPackument is the media type of the abbreviated packument.
const abbreviatedPackument = "application/vnd.npm.install-v1+json"

// realPackument is a packument of the public registry, as npm fetched it
// (testdata/packuments/README.md).
type realPackument struct {
	name string // the package's name
	kind string // the benchmark's name for it
	body []byte
}

// realPackuments reads the packuments of testdata/packuments.
func realPackuments(b *testing.B) []realPackument {
	b.Helper()
	var out []realPackument
	for _, kind := range []string{"express", "lodash", "types-node"} {
		f, err := os.Open(filepath.Join("testdata", "packuments", kind+".json.gz"))
		if err != nil {
			b.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		var doc struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.Name == "" {
			b.Fatalf("testdata/packuments/%s.json.gz: no name (%v)", kind, err)
		}
		out = append(out, realPackument{name: doc.Name, kind: kind, body: body})
	}
	return out
}

// startUpstream serves the real packuments (at /NAME, a scope's slash
// escaped or not) in front of the fixture registry fixture, which serves
// everything else, on loopback.
func startUpstream(b *testing.B, fixture string, real []realPackument) string {
	b.Helper()
	target, err := url.Parse(fixture)
	if err != nil {
		b.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	docs := map[string][]byte{}
	for _, p := range real {
		docs["/"+p.name] = p.body
		docs["/"+strings.Replace(p.name, "/", "%2f", 1)] = p.body
		docs["/"+strings.Replace(p.name, "/", "%2F", 1)] = p.body
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := docs[r.URL.EscapedPath()]
		if !ok {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// npmInstall installs pkg-0 from reg into a new directory with a new npm
// cache, and returns how long it took.
func npmInstall(b *testing.B, reg registry) time.Duration {
	b.Helper()
	dir, err := os.MkdirTemp("", "sandtrail-bench-npm-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"b","version":"1.0.0"}`), 0o644)
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--no-update-notifier", "--registry", reg.url,
		"--cache", filepath.Join(dir, ".npm"), "pkg-0")
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("npm install through %s: %v\n%s", reg.name, err, out)
	}
	return time.Since(start)
}

// mirrorServers starts the three servers, warm: sandtrail and Verdaccio
// have each served the tree once, and nginx serves sandtrail's answers,
// the real packuments' among them.
func mirrorServers(b *testing.B) []registry {
	b.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		b.Skip("skipping: needs npm")
	}
	real := realPackuments(b)
	fixture := npmtest.Start(b, npmtest.Tree(mirrorTree, 20000)...)
	up := startUpstream(b, fixture.URL, real)
	st := startSandtrailMirror(b, up, fixture.URL)
	vd := startVerdaccio(b, up)
	npmInstall(b, st)
	npmInstall(b, vd)
	addr := freePort(b)
	root := dumpRegistry(b, st, addr, mirrorTree, real)
	ngx := startNginx(b, root, addr)
	npmInstall(b, ngx)
	return []registry{st, ngx, vd}
}

// BenchmarkMirrorInstall measures a warm-cache `npm install` of a
// 200-package tree through sandtrail's mirror, nginx and Verdaccio, and
// reports sandtrail's median time as ratios to the others'
// (x-sandtrail-nginx: the target is ≤ 1.10; x-sandtrail-verdaccio: < 1).
func BenchmarkMirrorInstall(b *testing.B) {
	regs := mirrorServers(b)
	rounds := ioPairs(5)
	times := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		for r := range rounds {
			for k := range regs {
				reg := regs[(r+k)%len(regs)]
				times[reg.name] = append(times[reg.name], float64(npmInstall(b, reg).Milliseconds()))
			}
		}
	}
	b.StopTimer()
	for _, reg := range regs {
		b.ReportMetric(median(times[reg.name]), "ms/install-"+reg.name)
	}
	b.ReportMetric(median(times["sandtrail"])/median(times["nginx"]), "x-sandtrail-nginx")
	b.ReportMetric(median(times["sandtrail"])/median(times["verdaccio"]), "x-sandtrail-verdaccio")
}

// BenchmarkMirrorThroughput measures what each server serves with wrk
// (-t2 -c32) of one tarball, of one abbreviated packument of the fixture
// tree (one version) and of the abbreviated packuments of express (290
// versions), lodash (117) and @types/node (2,350), the servers in a
// rotating order in each iteration, and reports the median requests/s of
// each and the median of the iterations' ratios of sandtrail's to nginx's
// (x-sandtrail-nginx; targets: ≥ 0.5 of nginx, ≥ 2 of Verdaccio; the real
// packuments against nginx only: Verdaccio takes seconds for one of
// @types/node).
func BenchmarkMirrorThroughput(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("skipping: wrk is not installed (scripts/deps.sh bench)")
	}
	regs := mirrorServers(b)
	type kind struct {
		name, path string
		regs       []registry
	}
	kinds := []kind{{"tarball", "pkg-1/-/pkg-1-1.0.0.tgz", regs}, {"packument", "pkg-1", regs}}
	for _, p := range realPackuments(b) {
		kinds = append(kinds, kind{"packument-" + p.kind, p.name, regs[:2]})
	}
	for _, what := range kinds {
		b.Run(what.name, func(b *testing.B) {
			rps := map[string][]float64{}
			var ratios []float64
			for i := range b.N {
				got := map[string]float64{}
				for k := range what.regs {
					reg := what.regs[(i+k)%len(what.regs)]
					got[reg.name] = wrkRate(b, wrk, reg, what.path)
					rps[reg.name] = append(rps[reg.name], got[reg.name])
				}
				ratios = append(ratios, got["sandtrail"]/got["nginx"])
			}
			for _, reg := range what.regs {
				b.ReportMetric(median(rps[reg.name]), "rps-"+reg.name)
			}
			b.ReportMetric(median(ratios), "x-sandtrail-nginx")
			if len(what.regs) > 2 {
				b.ReportMetric(median(rps["sandtrail"])/median(rps["verdaccio"]), "x-sandtrail-verdaccio")
			}
		})
	}
}

// wrkRate runs wrk against path beneath reg, asking for the abbreviated
// packument (which a tarball's server ignores), and returns its
// requests/s: 0 when no request completed in the run.
func wrkRate(b *testing.B, wrk string, reg registry, path string) float64 {
	b.Helper()
	args := []string{"-t2", "-c32", "-d" + strconv.Itoa(int(ioWrkDuration().Seconds())) + "s", "-H", "Accept: " + abbreviatedPackument}
	out, err := exec.Command(wrk, append(args, reg.url+path)...).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk %s: %v\n%s", reg.name, err, out)
	}
	r, err := ioParseWrk(out)
	if err != nil && bytes.Contains(out, []byte(" 0 requests in ")) && !bytes.Contains(out, []byte("Socket errors")) {
		b.Logf("wrk %s: no request of %s completed in the run", reg.name, path)
		return 0 // the first answers took longer than the run
	}
	if err != nil || r.non2xx > 0 || r.socketErrors > 0 {
		b.Fatalf("wrk %s: %+v %v\n%s", reg.name, r, err, out)
	}
	return r.rps
}
