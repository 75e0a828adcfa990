package install_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/sandtrail/sandtrail/collector/session/launch"
)

// mirror is the --mirror URL of the image installs. Nothing listens there,
// and no test connects to it.
const mirror = "http://127.0.0.1:7878"

// shimDir is the shim directory inside an image (the one a session's PATH
// begins with), and shimTarget what each of its links names: the shim
// binary, as the image sees it.
const (
	shimDir    = launch.ShimDir
	shimTarget = "/usr/local/bin/sandtrail-shim"
)

const agentUser = launch.AgentUser

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("install.sh runs as root only, and the read-only mount namespace it runs in here needs root: run this test as root")
	}
	for _, cmd := range []string{"unshare", "mount", "chroot", "go"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("needs %s: %v", cmd, err)
		}
	}
}

// result is how one install.sh run ended.
type result struct {
	stdout, stderr string
	code           int
}

// readOnlyRoot binds each directory before "--" onto itself (a mount of its
// own, which stays writable), makes the root mount read-only, and runs the
// command after "--". unshare gives it a private mount namespace, so none
// of it is seen outside.
const readOnlyRoot = `set -e
while [ "$1" != -- ]; do mount --bind "$1" "$1"; shift; done
shift
mount -o remount,bind,ro /
exec "$@"`

// installSh runs install.sh with args where the root mount is read-only but
// for scratch and Go's build and module caches: a write outside scratch to
// the root mount (/etc, /usr and /var on the machines this runs on) fails
// there instead of landing on this machine. Other mounts stay writable;
// installImage's snapshot covers the places install.sh writes without
// --root wherever they are mounted. The environment's PREFIX, CARGO_HOME
// and SANDTRAIL_* paths are dropped, so install.sh uses its defaults; its
// temporary build directory is beneath scratch.
func installSh(t *testing.T, scratch string, args ...string) result {
	t.Helper()
	script, err := filepath.Abs("../../install.sh")
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(scratch, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"--mount", "--propagation", "private", "sh", "-c", readOnlyRoot, "sh", scratch}, goCaches(t)...)
	argv = append(append(argv, "--", script), args...)
	cmd := exec.Command("unshare", argv...)
	cmd.Env = withoutEnv(os.Environ(), func(k string) bool {
		return k == "PREFIX" || k == "CARGO_HOME" || k == "TMPDIR" || strings.HasPrefix(k, "SANDTRAIL_")
	})
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running install.sh %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// goCaches are the directories the go command writes while install.sh
// builds: its build cache and its module cache.
func goCaches(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE GOMODCACHE: %v", err)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// withoutEnv returns env without the variables whose names drop says.
func withoutEnv(env []string, drop func(name string) bool) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop(k) {
			out = append(out, kv)
		}
	}
	return out
}

// hostPaths are the places on this machine that install.sh writes without
// --root. An image install must leave each one as it was.
func hostPaths() []string {
	paths := []string{
		"/usr/local/bin/sandtrail", "/usr/local/bin/sandtrail-shim",
		"/usr/local/lib/sandtrail", "/usr/local/lib/sandtrail/shims",
		"/etc/sandtrail", "/var/lib/sandtrail", "/var/lib/sandtrail/keys",
		"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow",
		"/etc/profile.d", "/etc/profile.d/sandtrail-shims.sh",
		"/etc/pip.conf", "/etc/pip.conf.sandtrail-bak",
		"/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc",
		"/usr/local/cargo", "/usr/local/cargo/config.toml",
		"/etc/apt/apt.conf.d", "/etc/apt/apt.conf.d/80sandtrail-mirror",
		"/etc/systemd/system/sandtrail.service",
	}
	if h := os.Getenv("CARGO_HOME"); h != "" {
		paths = append(paths, filepath.Join(h, "config.toml"))
	}
	return paths
}

// snapshot describes each path: absent, or its mode, size and modification
// time, and a directory's entries.
func snapshot(paths []string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			out[p] = "absent"
			continue
		}
		s := fmt.Sprintf("%v size %d modified %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.IsDir() {
			entries, _ := os.ReadDir(p)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			s += " entries " + strings.Join(names, " ")
		}
		out[p] = s
	}
	return out
}

// installImage runs install.sh with args (which name an image root) and
// fails the test unless it succeeds and this machine's own files are as
// they were.
func installImage(t *testing.T, scratch string, args ...string) result {
	t.Helper()
	before := snapshot(hostPaths())
	r := installSh(t, scratch, args...)
	after := snapshot(hostPaths())
	if r.code != 0 {
		t.Fatalf("install.sh %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	for _, p := range hostPaths() {
		if before[p] != after[p] {
			t.Errorf("install.sh %s changed %s on this machine: before %s, after %s", strings.Join(args, " "), p, before[p], after[p])
		}
	}
	return r
}

// tree lists every path beneath root, relative to it ("." for root
// itself): "d 0755" for a directory, "f 0644" for a regular file, "l
// TARGET" for a symbolic link. Every entry must belong to root (uid and
// gid 0), as an image's system files do.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s belongs to %d:%d, want 0:0", rel, st.Uid, st.Gid)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("d %04o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			out[rel] = fmt.Sprintf("f %04o", fi.Mode().Perm())
		default:
			out[rel] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// shimNames are the names the image's shim binary stands in for
// (`sandtrail-shim list`, the shim's one list of managers).
func shimNames(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, shimTarget), "list").Output()
	if err != nil {
		t.Fatalf("%s list: %v", shimTarget, err)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		t.Fatalf("%s list printed no names", shimTarget)
	}
	return names
}

// imageFiles is every path an install into an empty image root with
// --mirror writes, but for the shim links. Nothing else may be there: no
// data dir, no signing key, no systemd unit.
var imageFiles = map[string]string{
	".":                                     "d 0755",
	"etc":                                   "d 0755",
	"etc/apt":                               "d 0755",
	"etc/apt/apt.conf.d":                    "d 0755",
	"etc/apt/apt.conf.d/80sandtrail-mirror": "f 0644",
	"etc/group":                             "f 0644",
	"etc/npmrc":                             "f 0644",
	"etc/passwd":                            "f 0644",
	"etc/pip.conf":                          "f 0644",
	"etc/profile.d":                         "d 0755",
	"etc/profile.d/sandtrail-shims.sh":      "f 0644",
	"etc/sandtrail":                         "d 0755",
	"etc/sandtrail/config.yaml":             "f 0644",
	"usr":                                   "d 0755",
	"usr/etc":                               "d 0755",
	"usr/etc/npmrc":                         "f 0644",
	"usr/local":                             "d 0755",
	"usr/local/bin":                         "d 0755",
	"usr/local/bin/sandtrail":               "f 0755",
	"usr/local/bin/sandtrail-shim":          "f 0755",
	"usr/local/cargo":                       "d 0755",
	"usr/local/cargo/config.toml":           "f 0644",
	"usr/local/etc":                         "d 0755",
	"usr/local/etc/npmrc":                   "f 0644",
	"usr/local/lib":                         "d 0755",
	"usr/local/lib/sandtrail":               "d 0755",
	"usr/local/lib/sandtrail/shims":         "d 0755",
}

// TestInstallImageRoot installs into an empty image root, as `install.sh
// --root $(mktemp -d) --mirror URL` does, and checks every file it wrote,
// that the real managers read them, and that the agent can run the shims
// inside the image.
func TestInstallImageRoot(t *testing.T) {
	needRoot(t)
	scratch := t.TempDir()
	root, err := os.MkdirTemp(scratch, "image-") // 0700, as mktemp -d makes it
	if err != nil {
		t.Fatal(err)
	}
	r := installImage(t, scratch, "--root", root, "--mirror", mirror)
	t.Logf("install.sh:\n%s", r.stdout)

	want := maps.Clone(imageFiles)
	names := shimNames(t, root)
	for _, n := range names {
		want[strings.TrimPrefix(shimDir, "/")+"/"+n] = "l " + shimTarget
	}
	got := tree(t, root)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s in the image is %q, want %q", p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("install.sh wrote %s (%s) in the image, which an image install does not write", p, g)
		}
	}

	t.Run("profile.d puts the shims first on PATH", func(t *testing.T) {
		// Sourced twice, as nested login shells do: the directory is there once.
		cmd := exec.Command("sh", "-c", `. "$1"; . "$1"; printf %s "$PATH"`, "sh", filepath.Join(root, "etc/profile.d/sandtrail-shims.sh"))
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		if want := shimDir + ":/usr/bin:/bin"; err != nil || string(out) != want {
			t.Errorf("PATH after profile.d = %q, %v, want %q", out, err, want)
		}
	})
	t.Run("config.yaml", func(t *testing.T) {
		b := readFile(t, root, "etc/sandtrail/config.yaml")
		if !strings.Contains(b, "\ndata_dir: /var/lib/sandtrail\n") {
			t.Errorf("etc/sandtrail/config.yaml = %q, want data_dir: /var/lib/sandtrail", b)
		}
	})
	t.Run("pip.conf", func(t *testing.T) {
		ini := parseINI(readFile(t, root, "etc/pip.conf"))
		if got, want := ini["global"]["index-url"], mirror+"/pypi/simple/"; got != want {
			t.Errorf("pip.conf [global] index-url = %q, want %q", got, want)
		}
	})
	t.Run("npmrc", func(t *testing.T) {
		for _, f := range []string{"etc/npmrc", "usr/etc/npmrc", "usr/local/etc/npmrc"} {
			if got, want := registryLines(readFile(t, root, f)), []string{mirror + "/npm/"}; !slices.Equal(got, want) {
				t.Errorf("%s registry= %q, want %q", f, got, want)
			}
		}
	})
	t.Run("cargo", func(t *testing.T) {
		var cfg struct {
			Source map[string]map[string]string `toml:"source"`
		}
		if err := toml.Unmarshal([]byte(readFile(t, root, "usr/local/cargo/config.toml")), &cfg); err != nil {
			t.Fatalf("parsing usr/local/cargo/config.toml: %v", err)
		}
		replacement := cfg.Source["crates-io"]["replace-with"]
		if replacement == "" || replacement == "crates-io" {
			t.Fatalf("cargo's source.crates-io.replace-with = %q, want a source of the mirror's", replacement)
		}
		if got, want := cfg.Source[replacement]["registry"], "sparse+"+mirror+"/crates/index/"; got != want {
			t.Errorf("cargo's source.%s.registry = %q, want %q (the mirror's sparse index)", replacement, got, want)
		}
	})
	t.Run("apt proxies to the mirror", func(t *testing.T) {
		b := readFile(t, root, "etc/apt/apt.conf.d/80sandtrail-mirror")
		if want := `Acquire::http::Proxy "` + mirror + `/";`; !slices.Contains(strings.Split(b, "\n"), want) {
			t.Errorf("80sandtrail-mirror = %q, want the line %s", b, want)
		}
	})
	var uid, gid int
	t.Run("the agent user", func(t *testing.T) {
		passwd := readFile(t, root, "etc/passwd")
		group := readFile(t, root, "etc/group")
		uid, gid = checkAgent(t, passwd, group)
		if passwd != fmt.Sprintf("%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", agentUser, uid, gid) {
			t.Errorf("etc/passwd of an empty image root = %q, want the agent's line alone", passwd)
		}
		if group != fmt.Sprintf("%s:x:%d:\n", agentUser, gid) {
			t.Errorf("etc/group of an empty image root = %q, want the agent's line alone", group)
		}
	})

	// The real clients, against the files as written.
	t.Run("npm reads the npmrc files", func(t *testing.T) {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("npm is not installed")
		}
		home := t.TempDir()
		empty := filepath.Join(home, "empty.npmrc")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"etc/npmrc, the globalconfig of Debian's npm", []string{"--globalconfig", filepath.Join(root, "etc/npmrc")}},
			{"usr/etc/npmrc, upstream npm's with node in /usr/bin", []string{"--prefix", filepath.Join(root, "usr")}},
			{"usr/local/etc/npmrc, upstream npm's with node in /usr/local/bin", []string{"--prefix", filepath.Join(root, "usr/local")}},
		} {
			cmd := exec.Command("npm", append([]string{"config", "get", "registry", "--userconfig", empty}, tc.args...)...)
			cmd.Env = append(withoutEnv(os.Environ(), func(k string) bool {
				return strings.HasPrefix(strings.ToLower(k), "npm_config_") || k == "HOME"
			}), "HOME="+home)
			out, err := cmd.Output()
			if got, want := strings.TrimSpace(string(out)), mirror+"/npm/"; err != nil || got != want {
				t.Errorf("%s: npm config get registry %s = %q, %v, want %q", tc.name, strings.Join(tc.args, " "), got, err, want)
			}
		}
	})
	t.Run("pip reads pip.conf", func(t *testing.T) {
		if _, err := exec.LookPath("pip"); err != nil {
			t.Skip("pip is not installed")
		}
		cmd := exec.Command("pip", "config", "list")
		cmd.Env = append(withoutEnv(os.Environ(), func(k string) bool { return strings.HasPrefix(k, "PIP_") }),
			"PIP_CONFIG_FILE="+filepath.Join(root, "etc/pip.conf"))
		out, err := cmd.Output()
		if want := "global.index-url='" + mirror + "/pypi/simple/'"; err != nil || !slices.Contains(strings.Split(string(out), "\n"), want) {
			t.Errorf("pip config list = %q, %v, want the line %s", out, err, want)
		}
	})
	t.Run("cargo reads config.toml", func(t *testing.T) {
		if _, err := exec.LookPath("cargo"); err != nil {
			t.Skip("cargo is not installed")
		}
		// A copy of the image's CARGO_HOME/config.toml, so that cargo's own
		// files land in the copy; --offline: nothing is fetched, and
		// cargo's error names the source it searched.
		cargoHome, project := t.TempDir(), t.TempDir()
		writeFile(t, cargoHome, "config.toml", readFile(t, root, "usr/local/cargo/config.toml"))
		writeFile(t, project, "Cargo.toml", "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n")
		writeFile(t, project, "src/main.rs", "fn main() {}\n")
		cmd := exec.Command("cargo", "generate-lockfile", "--offline")
		cmd.Dir = project
		cmd.Env = append(withoutEnv(os.Environ(), func(k string) bool { return strings.HasPrefix(k, "CARGO_") }),
			"CARGO_HOME="+cargoHome, "CARGO_NET_OFFLINE=true")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "`sandtrail-mirror`") || !strings.Contains(string(out), "replacing registry `crates-io`") {
			t.Errorf("cargo generate-lockfile --offline said %q, want it to search `sandtrail-mirror`, which replaces crates-io", out)
		}
	})
	t.Run("apt reads the proxy snippet", func(t *testing.T) {
		if _, err := exec.LookPath("apt-config"); err != nil {
			t.Skip("apt-config is not installed")
		}
		out, err := exec.Command("apt-config", "-c", filepath.Join(root, "etc/apt/apt.conf.d/80sandtrail-mirror"), "dump", "Acquire::http::Proxy").Output()
		if want := `Acquire::http::Proxy "` + mirror + `/";`; err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("apt-config dump Acquire::http::Proxy = %q, %v, want %s", out, err, want)
		}
	})

	// Last, since it makes the image's /proc: the agent runs the shims in
	// the image, found on the PATH that profile.d makes.
	t.Run("the agent runs the shims in the image", func(t *testing.T) {
		if uid == 0 {
			t.Skip("no agent user to run as")
		}
		out, _, code := inImage(t, root, uid, gid, shimTarget, "list")
		if code != 0 || !slices.Equal(strings.Fields(out), names) {
			t.Errorf("in the image, as uid %d: sandtrail-shim list = %q, exit %d, want %q", uid, out, code, names)
		}
		for _, n := range names {
			_, stderr, code := inImage(t, root, uid, gid, n, "--version")
			// The shim ran, by its link's name, and found no real manager
			// after itself: the image has none.
			if code != 127 || !strings.Contains(stderr, "sandtrail: the real "+n+" is not on PATH after the shim") {
				t.Errorf("in the image, as uid %d: %s --version exited %d, stderr %q; want the shim's 127, no real %s", uid, n, code, stderr, n)
			}
		}
	})
}

// inImage runs argv in the image root as uid:gid (chroot) with /proc
// mounted, in a mount namespace of its own, with PATH as profile.d makes
// it.
func inImage(t *testing.T, root string, uid, gid int, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	const script = `set -e
root=$1 chroot=$2 spec=$3
shift 3
mkdir -p "$root/proc"
mount -t proc proc "$root/proc"
PATH=` + shimDir + `:/usr/bin:/bin exec "$chroot" --userspec="$spec" "$root" "$@"`
	args := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", root, chroot, fmt.Sprintf("%d:%d", uid, gid)}, argv...)
	cmd := exec.Command("unshare", args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s in the image: %v", strings.Join(argv, " "), err)
	}
	return o.String(), e.String(), 0
}

// TestInstallOverImageRoot installs twice into an image root that has its
// own users, npm and pip configuration, as a base image's root does: the
// agent gets an id that no user or group has, the operator's files are
// kept, and the second run changes nothing it did not write.
func TestInstallOverImageRoot(t *testing.T) {
	needRoot(t)
	scratch := t.TempDir()
	root := filepath.Join(scratch, "image")
	const (
		passwd  = "root:x:0:0:root:/root:/bin/bash\n_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\nmessagebus:x:999:999::/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
		group   = "root:x:0:\nmessagebus:x:999:\ndocker:x:998:\nnogroup:x:65534:" // no final newline
		shadow  = "root:*:20228:0:99999:7:::\nmessagebus:!:20228::::::\n"
		gshadow = "root:*::\nmessagebus:!::\ndocker:!::\n"
		pipConf = "[global]\ntimeout = 60\n"
		npmrc   = "cafile=/etc/ssl/certs/ca-certificates.crt\nregistry=https://registry.npmjs.org/\n"
	)
	writeFile(t, root, "etc/passwd", passwd)
	writeFile(t, root, "etc/group", group)
	writeFile(t, root, "etc/shadow", shadow)
	writeFile(t, root, "etc/gshadow", gshadow)
	writeFile(t, root, "etc/pip.conf", pipConf)
	writeFile(t, root, "etc/npmrc", npmrc)
	// Debian's npm names its global npmrc in its builtin one (npm
	// 9.2.0~ds1-1's, as shipped); another npm may name another file.
	writeFile(t, root, "usr/share/nodejs/npm/npmrc", "# DO NOT MODIFY THIS FILE - use /etc/npmrc instead.\nglobalconfig=/etc/npmrc\nglobalignorefile=/etc/npmignore\nprefix=/usr/local\n")
	writeFile(t, root, "usr/lib/node_modules/npm/npmrc", "globalconfig=/etc/npm/npmrc\n")

	first := installImage(t, scratch, "--root", root, "--mirror", mirror)
	second := installImage(t, scratch, "--root", root, "--mirror", mirror)
	if !strings.Contains(first.stdout, "added user "+agentUser) || strings.Contains(second.stdout, "added user") {
		t.Errorf("the first run said %q, the second %q: want the user added once", first.stdout, second.stdout)
	}

	gotPasswd, gotGroup := readFile(t, root, "etc/passwd"), readFile(t, root, "etc/group")
	uid, gid := checkAgent(t, gotPasswd, gotGroup)
	if uid != 997 || gid != 997 {
		t.Errorf("the agent is %d:%d, want 997:997 (999 is a user's and a group's, 998 a group's)", uid, gid)
	}
	if want := passwd + fmt.Sprintf("%s:x:997:997::/nonexistent:/usr/sbin/nologin\n", agentUser); gotPasswd != want {
		t.Errorf("etc/passwd = %q, want %q", gotPasswd, want)
	}
	if want := group + fmt.Sprintf("\n%s:x:997:\n", agentUser); gotGroup != want {
		t.Errorf("etc/group = %q, want %q", gotGroup, want)
	}
	if got, want := readFile(t, root, "etc/shadow"), shadow+agentUser+":!:::::::\n"; got != want {
		t.Errorf("etc/shadow = %q, want %q (locked, 9 fields)", got, want)
	}
	if got, want := readFile(t, root, "etc/gshadow"), gshadow+agentUser+":!::\n"; got != want {
		t.Errorf("etc/gshadow = %q, want %q", got, want)
	}

	if got := readFile(t, root, "etc/pip.conf.sandtrail-bak"); got != pipConf {
		t.Errorf("etc/pip.conf.sandtrail-bak = %q, want the operator's %q", got, pipConf)
	}
	if got := parseINI(readFile(t, root, "etc/pip.conf"))["global"]["index-url"]; got != mirror+"/pypi/simple/" {
		t.Errorf("pip.conf index-url = %q, want the mirror's", got)
	}
	if got, want := readFile(t, root, "etc/npmrc"), "cafile=/etc/ssl/certs/ca-certificates.crt\nregistry="+mirror+"/npm/\n"; got != want {
		t.Errorf("etc/npmrc = %q, want %q: the operator's other lines kept, one registry", got, want)
	}
	for _, f := range []string{"etc/npm/npmrc", "usr/etc/npmrc", "usr/local/etc/npmrc"} {
		if got, want := registryLines(readFile(t, root, f)), []string{mirror + "/npm/"}; !slices.Equal(got, want) {
			t.Errorf("%s registry= %q, want %q", f, got, want)
		}
	}
}

// TestInstallRefusesBadArguments: a bad --mirror or --root is refused with
// a message that says what is wrong, exit 2, before anything is built or
// written.
func TestInstallRefusesBadArguments(t *testing.T) {
	needRoot(t)
	scratch := t.TempDir()
	root := filepath.Join(scratch, "image")
	file := filepath.Join(scratch, "file")
	missing := filepath.Join(scratch, "missing")
	writeFile(t, scratch, "file", "")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mirror of another scheme", []string{"--root", root, "--mirror", "ftp://127.0.0.1:7878"}, "--mirror ftp://127.0.0.1:7878: want an http:// or https:// URL with a host"},
		{"mirror without a scheme", []string{"--root", root, "--mirror", "127.0.0.1:7878"}, "want an http:// or https:// URL with a host"},
		{"mirror without a host", []string{"--root", root, "--mirror", "http:///npm"}, "want an http:// or https:// URL with a host"},
		{"mirror with a space", []string{"--root", root, "--mirror", "http://127.0.0.1:7878/a b"}, "want a URL, without spaces, quotes or backslashes"},
		{"mirror with a quote", []string{"--root", root, "--mirror", `http://127.0.0.1:7878/"`}, "want a URL, without spaces, quotes or backslashes"},
		{"empty mirror", []string{"--root", root, "--mirror="}, "--mirror needs a URL"},
		{"mirror without its URL", []string{"--root", root, "--mirror"}, "--mirror needs a URL"},
		{"missing root", []string{"--root", missing, "--mirror", mirror}, "--root " + missing + ": no such directory"},
		{"root that is a file", []string{"--root", file, "--mirror", mirror}, "--root " + file + ": not a directory"},
		{"this machine's root", []string{"--root", "/", "--mirror", mirror}, "--root /: that is this machine; run install.sh without --root"},
		{"root without its directory", []string{"--mirror", mirror, "--root"}, "--root needs a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(hostPaths())
			r := installSh(t, scratch, tc.args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "install: ") || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("install.sh %s: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, and %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.want)
			}
			if after := snapshot(hostPaths()); !maps.Equal(before, after) {
				t.Errorf("install.sh %s changed this machine's files", strings.Join(tc.args, " "))
			}
		})
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Errorf("the image root holds %v after refused runs (%v), want nothing", entries, err)
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing root exists after a refused run: %v", err)
	}
}

// checkAgent checks the agent's passwd and group entries, as `useradd
// --system --user-group --no-create-home --home-dir /nonexistent --shell
// /usr/sbin/nologin` makes them: one of each, a system id below 1000, and
// its own group. It returns the uid and gid.
func checkAgent(t *testing.T, passwd, group string) (uid, gid int) {
	t.Helper()
	users := entries(passwd, agentUser)
	if len(users) != 1 || len(users[0]) != 7 {
		t.Fatalf("etc/passwd has %q for %s, want one entry of 7 fields", users, agentUser)
	}
	u := users[0]
	uid, err1 := strconv.Atoi(u[2])
	gid, err2 := strconv.Atoi(u[3])
	if err1 != nil || err2 != nil || uid < 100 || uid > 999 || u[1] != "x" || u[5] != "/nonexistent" || u[6] != "/usr/sbin/nologin" {
		t.Errorf("the agent's passwd entry is %q, want x, a system uid (100-999), home /nonexistent, shell /usr/sbin/nologin", u)
	}
	groups := entries(group, agentUser)
	if len(groups) != 1 || len(groups[0]) != 4 || groups[0][2] != strconv.Itoa(gid) || groups[0][3] != "" {
		t.Errorf("etc/group has %q for %s, want one entry with gid %d and no members", groups, agentUser, gid)
	}
	return uid, gid
}

// entries returns the colon-separated entries of file named name.
func entries(file, name string) [][]string {
	var out [][]string
	for _, line := range strings.Split(file, "\n") {
		if f := strings.Split(line, ":"); f[0] == name {
			out = append(out, f)
		}
	}
	return out
}

// parseINI reads pip.conf's ini: [section], key = value, # and ; comments.
func parseINI(s string) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			if out[section] == nil {
				out[section] = map[string]string{}
			}
			out[section][strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// registryLines returns the values of an npmrc's registry= lines.
func registryLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "registry" {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

func readFile(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("reading %s of the image: %v", rel, err)
	}
	return string(b)
}

func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
