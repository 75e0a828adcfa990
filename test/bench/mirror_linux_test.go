package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// The mirror benchmarks compare sandtrail's mirror with nginx serving the
// same files (the limit: no verification, no policy, no record) and with
// Verdaccio 6 as a warm pull-through, all on loopback, all in front of the
// same fixture upstream (a tree of mirrorTree packages). Each server runs
// in a process of its own. The installs of one round run one after the
// other in a rotating order, and the result is the median over rounds.

// mirrorTree is the size of the benchmark's package tree.
const mirrorTree = 200

// registry is one server under test.
type registry struct {
	name string
	url  string // the npm registry URL, ending in /
	stop func()
}

// startSandtrailMirror builds sandtrail and runs `sandtrail mirror` with
// its own data directory in front of up.
func startSandtrailMirror(b *testing.B, up string) registry {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "sandtrail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		b.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(bin, "--data", data, "keys", "generate").CombinedOutput(); err != nil {
		b.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}
	pol := filepath.Join(dir, "policy.yaml")
	os.WriteFile(pol, []byte("sources:\n  registries:\n    npm: ["+up+"/]\n"), 0o644)
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

// dumpRegistry writes what the warm server at from serves for the tree, as
// files for nginx at host: each packument (with its tarball URLs on host)
// as npm/<name>/index.json, each tarball at its path.
func dumpRegistry(b *testing.B, from registry, host string, n int) string {
	b.Helper()
	root := b.TempDir()
	get := func(url, hostHeader string) []byte {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = hostHeader
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
	for i := range n {
		name := fmt.Sprintf("pkg-%d", i)
		dst := filepath.Join(root, "npm", name)
		os.MkdirAll(filepath.Join(dst, "-"), 0o755)
		os.WriteFile(filepath.Join(dst, "index.json"), get(from.url+name, host), 0o644)
		tgz := name + "-1.0.0.tgz"
		os.WriteFile(filepath.Join(dst, "-", tgz), get(from.url+name+"/-/"+tgz, host), 0o644)
	}
	return root
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
// have each served the tree once, and nginx serves sandtrail's answers.
func mirrorServers(b *testing.B) []registry {
	b.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		b.Skip("skipping: needs npm")
	}
	up := npmtest.Start(b, npmtest.Tree(mirrorTree, 20000)...)
	st := startSandtrailMirror(b, up.URL)
	vd := startVerdaccio(b, up.URL)
	npmInstall(b, st)
	npmInstall(b, vd)
	addr := freePort(b)
	root := dumpRegistry(b, st, addr, mirrorTree)
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
// (-t2 -c32) of one tarball and of one abbreviated packument, and reports
// sandtrail's requests/s as ratios (targets: ≥ 0.5 of nginx, ≥ 2 of
// Verdaccio).
func BenchmarkMirrorThroughput(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("skipping: wrk is not installed (scripts/deps.sh bench)")
	}
	regs := mirrorServers(b)
	for _, what := range []struct{ name, path, accept string }{
		{"tarball", "pkg-1/-/pkg-1-1.0.0.tgz", ""},
		{"packument", "pkg-1", "application/vnd.npm.install-v1+json"},
	} {
		b.Run(what.name, func(b *testing.B) {
			rps := map[string]float64{}
			for range b.N {
				for _, reg := range regs {
					args := []string{"-t2", "-c32", "-d" + strconv.Itoa(int(ioWrkDuration().Seconds())) + "s"}
					if what.accept != "" {
						args = append(args, "-H", "Accept: "+what.accept)
					}
					out, err := exec.Command(wrk, append(args, reg.url+what.path)...).CombinedOutput()
					if err != nil {
						b.Fatalf("wrk %s: %v\n%s", reg.name, err, out)
					}
					r, err := ioParseWrk(out)
					if err != nil || r.non2xx > 0 || r.socketErrors > 0 {
						b.Fatalf("wrk %s: %+v %v\n%s", reg.name, r, err, out)
					}
					rps[reg.name] = r.rps
				}
			}
			for _, reg := range regs {
				b.ReportMetric(rps[reg.name], "rps-"+reg.name)
			}
			b.ReportMetric(rps["sandtrail"]/rps["nginx"], "x-sandtrail-nginx")
			b.ReportMetric(rps["sandtrail"]/rps["verdaccio"], "x-sandtrail-verdaccio")
		})
	}
}
