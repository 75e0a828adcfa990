package pkgview

import (
	"fmt"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// scriptSum is what an attribution test checks of a row.
type scriptSum struct {
	row       string   // eco:name@version seen
	procs     []string // pid:match
	sensitive []string // op path
	files     int
	conns     []string // dst_ip:port domain
}

func sumScripts(v *View) []scriptSum {
	var out []scriptSum
	for _, p := range v.Packages {
		if len(p.Processes) == 0 {
			continue
		}
		s := scriptSum{row: fmt.Sprintf("%s:%s@%s %s", p.Ecosystem, p.Name, p.Version, p.Seen), files: len(p.Files)}
		for _, pr := range p.Processes {
			s.procs = append(s.procs, fmt.Sprintf("%d:%s", pr.Pid, pr.Match))
		}
		for _, f := range p.Files {
			if f.Sensitive {
				s.sensitive = append(s.sensitive, f.Op+" "+f.Path)
			}
		}
		for _, c := range p.Connections {
			s.conns = append(s.conns, fmt.Sprintf("%s:%d %s", c.DstIP, c.DstPort, c.Domain))
		}
		out = append(out, s)
	}
	return out
}

func TestScripts(t *testing.T) {
	tests := []struct {
		name   string
		events func(r *rec)
		want   []scriptSum
	}{
		{"npm postinstall reads .npmrc and connects", func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "install", "evil")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "install", "evil")
			r.fetch("npm", "evil", "1.0.0", sriA, "served")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/evil", "sh", "-c", "node install.js")
			r.spawn(13, 12, "/usr/bin/node", "/w/node_modules/evil", "node", "install.js")
			r.file(13, "read", "/home/agent/.npmrc")
			r.file(13, "write", "/w/node_modules/evil/out.txt")
			r.connect(13, "203.0.113.9", 443, "exfil.example.invalid")
			r.exit(13)
			r.exit(12)
			r.file(11, "read", "/home/agent/.npmrc") // npm itself: not the package's
			r.exit(11)
			r.install("npm", "evil", "1.0.0", sriA, 11)
		}, []scriptSum{{row: "npm:evil@1.0.0 shim+mirror", procs: []string{"12:npm_lifecycle", "13:inherited"},
			sensitive: []string{"read /home/agent/.npmrc"}, files: 2, conns: []string{"203.0.113.9:443 exfil.example.invalid"}}}},
		{"npm scoped package, the deepest node_modules", func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "ci")
			r.spawn(11, 10, "/usr/bin/node", "/w", "node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "ci")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/a/node_modules/@s/n", "sh", "-c", "node-gyp rebuild")
			r.install("npm", "a", "1.0.0", sriA, 11)
			r.install("npm", "@s/n", "2.0.0", sriB, 11)
		}, []scriptSum{{row: "npm:@s/n@2.0.0 shim_only", procs: []string{"12:npm_lifecycle"}}}},
		{"npm: a process in node_modules not under npm is nobody's script", func(r *rec) {
			r.spawn(10, 1, "/bin/sh", "/w/node_modules/a", "sh", "-c", "ls")
			r.install("npm", "a", "1.0.0", sriA, 11)
		}, nil},
		{"npm: the row of the same manager is preferred", func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "i")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "i")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/a", "sh", "-c", "x")
			r.install("npm", "a", "1.0.0", sriA, 11)
			r.install("npm", "a", "2.0.0", sriB, 99)
		}, []scriptSum{{row: "npm:a@1.0.0 shim_only", procs: []string{"12:npm_lifecycle"}}}},
		{"cargo build script writes and connects", func(r *rec) {
			r.spawn(20, 1, testShimDir+"/cargo", "/w", "cargo", "build")
			r.spawn(21, 20, "/root/.cargo/bin/cargo", "/w", "cargo", "build")
			r.spawn(22, 21, "/root/.rustup/toolchains/stable/bin/rustc", "/w", "rustc", "--crate-name", "build_script_build")
			r.exit(22)
			r.spawn(23, 21, "/w/target/debug/build/foo_sys-0123456789abcdef/build-script-build", "/w/foo-sys",
				"/w/target/debug/build/foo_sys-0123456789abcdef/build-script-build")
			r.spawn(24, 23, "/usr/bin/cc", "/w/foo-sys", "cc", "-c", "x.c")
			r.file(24, "write", "/w/target/debug/build/foo_sys-0123456789abcdef/out/x.o")
			r.file(23, "read", "/root/.ssh/id_ed25519")
			r.connect(23, "198.51.100.7", 80, "")
			r.install("cargo", "foo-sys", "0.3.1", shaA, 21)
		}, []scriptSum{{row: "cargo:foo-sys@0.3.1 shim_only", procs: []string{"23:cargo_build_script", "24:inherited"},
			sensitive: []string{"read /root/.ssh/id_ed25519"}, files: 2, conns: []string{"198.51.100.7:80 "}}}},
		{"dpkg postinst, by a shell and with an arch", func(r *rec) {
			r.spawn(30, 1, testShimDir+"/apt-get", "/", "apt-get", "install", "-y", "curl")
			r.spawn(31, 30, "/usr/bin/apt-get", "/", "apt-get", "install", "-y", "curl")
			r.spawn(32, 31, "/usr/bin/dpkg", "/", "dpkg", "--configure", "curl")
			r.spawn(33, 32, "/var/lib/dpkg/info/curl:amd64.postinst", "/", "/bin/sh", "/var/lib/dpkg/info/curl:amd64.postinst", "configure")
			r.file(33, "read", "/etc/shadow")
			r.spawn(34, 32, "/bin/sh", "/", "/bin/sh", "/var/lib/dpkg/info/libfoo1.preinst", "install")
			r.install("deb", "curl", "7.88.1-10", shaA, 31)
			r.install("deb", "libfoo1", "1.0-1", shaB, 31)
		}, []scriptSum{
			{row: "deb:curl@7.88.1-10 shim_only", procs: []string{"33:dpkg_maintainer_script"}, sensitive: []string{"read /etc/shadow"}, files: 1},
			{row: "deb:libfoo1@1.0-1 shim_only", procs: []string{"34:dpkg_maintainer_script"}}}},
		{"a host package's dpkg trigger is no row", func(r *rec) {
			r.spawn(30, 1, testShimDir+"/apt-get", "/", "apt-get", "install", "-y", "sl")
			r.spawn(31, 30, "/usr/bin/apt-get", "/", "apt-get", "install", "-y", "sl").Proc.UID = event.U32(0)
			r.spawn(32, 31, "/usr/bin/dpkg", "/", "dpkg", "--configure", "--pending").Proc.UID = event.U32(0)
			r.spawn(33, 32, "/var/lib/dpkg/info/man-db.postinst", "/", "/bin/sh", "/var/lib/dpkg/info/man-db.postinst", "triggered", "/usr/share/man").Proc.UID = event.U32(0)
			r.spawn(34, 33, "/usr/bin/mandb", "/", "mandb", "-pq").Proc.UID = event.U32(0)
			r.spawn(35, 32, "/var/lib/dpkg/info/sl.postinst", "/", "/var/lib/dpkg/info/sl.postinst", "configure", "").Proc.UID = event.U32(0)
			r.install("deb", "sl", "5.02-1+b1", shaA, 31)
		}, []scriptSum{{row: "deb:sl@5.02-1+b1 shim_only", procs: []string{"35:dpkg_maintainer_script"}}}},
		{"a dpkg trigger of a package the session installed is under its row", func(r *rec) {
			r.spawn(31, 1, "/usr/bin/apt-get", "/", "apt-get", "install", "-y", "x").Proc.UID = event.U32(0)
			r.spawn(32, 31, "/usr/bin/dpkg", "/", "dpkg", "--configure", "x").Proc.UID = event.U32(0)
			r.spawn(33, 32, "/var/lib/dpkg/info/x.postinst", "/", "/var/lib/dpkg/info/x.postinst", "triggered", "/usr/lib").Proc.UID = event.U32(0)
			r.install("deb", "x", "1.0-1", shaA, 31)
		}, []scriptSum{{row: "deb:x@1.0-1 shim_only", procs: []string{"33:dpkg_maintainer_script"}}}},
		{"an unnamed package's configure with its trigger is kernel_only", func(r *rec) {
			r.spawn(31, 1, "/usr/bin/apt-get", "/", "apt-get", "install", "-y", "x").Proc.UID = event.U32(0)
			r.spawn(32, 31, "/usr/bin/dpkg", "/", "dpkg", "--configure", "ghost").Proc.UID = event.U32(0)
			r.spawn(33, 32, "/var/lib/dpkg/info/ghost.postinst", "/", "/var/lib/dpkg/info/ghost.postinst", "configure", "").Proc.UID = event.U32(0)
			r.spawn(34, 32, "/var/lib/dpkg/info/ghost.postinst", "/", "/var/lib/dpkg/info/ghost.postinst", "triggered", "/usr/lib").Proc.UID = event.U32(0)
		}, []scriptSum{{row: "deb:ghost@ kernel_only", procs: []string{"33:dpkg_maintainer_script", "34:dpkg_maintainer_script"}}}},
		{"a trigger run by the agent, not dpkg's root, is kernel_only", func(r *rec) {
			r.spawn(33, 1, "/bin/sh", "/", "/bin/sh", "/var/lib/dpkg/info/man-db.postinst", "triggered", "/usr/share/man")
		}, []scriptSum{{row: "deb:man-db@ kernel_only", procs: []string{"33:dpkg_maintainer_script"}}}},
		{"pip sdist build hook in pip-install-*/<name>_<hash>", func(r *rec) {
			r.spawn(40, 1, testShimDir+"/pip", "/w", "pip", "install", "Evil_Pkg")
			r.spawn(41, 40, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "Evil_Pkg")
			r.fetch("pypi", "evil-pkg", "1.0", shaA, "served")
			r.spawn(42, 41, "/usr/bin/python3", "/tmp/pip-install-k2j3h4/evil-pkg_0123456789abcdef0123456789abcdef",
				"/usr/bin/python3", "/usr/lib/python3/dist-packages/pip/_vendor/pyproject_hooks/_in_process/_in_process.py",
				"build_wheel", "/tmp/tmpabc")
			r.file(42, "read", "/home/agent/.pypirc")
			r.spawn(43, 1, "/usr/bin/python3", "/tmp/pip-install-k2j3h4/evil-pkg_0123456789abcdef0123456789abcdef", "python3", "x.py")
			r.install("pypi", "Evil_Pkg", "1.0", shaA, 41)
		}, []scriptSum{{row: "pypi:Evil_Pkg@1.0 shim+mirror", procs: []string{"42:pip_sdist_build"},
			sensitive: []string{"read /home/agent/.pypirc"}, files: 1}}},
		{"pip legacy setup.py of a local directory", func(r *rec) {
			r.spawn(40, 1, testShimDir+"/pip3", "/w", "pip3", "install", "./mypkg")
			r.spawn(41, 40, "/usr/bin/python3", "/w", "python3", "-m", "pip", "install", "./mypkg")
			r.spawn(42, 41, "/usr/bin/python3", "/w/mypkg", "python3", "/w/mypkg/setup.py", "bdist_wheel")
			r.install("pypi", "mypkg", "0.1", shaA, 41)
		}, []scriptSum{{row: "pypi:mypkg@0.1 shim_only", procs: []string{"42:pip_sdist_build"}}}},
		{"a script of a package no pkg event names is kernel_only", func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install")
			r.spawn(11, 10, "/bin/sh", "/w/node_modules/ghost", "sh", "-c", "curl x")
			r.connect(11, "192.0.2.1", 443, "")
		}, []scriptSum{{row: "npm:ghost@ kernel_only", procs: []string{"11:npm_lifecycle"}, conns: []string{"192.0.2.1:443 "}}}},
		{"a reused pid is a new process", func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "i")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "i")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/a", "sh", "-c", "x")
			r.exit(12)
			r.spawn(12, 1, "/bin/cat", "/w", "cat", "/home/agent/.npmrc")
			r.file(12, "read", "/home/agent/.npmrc")
			r.install("npm", "a", "1.0.0", sriA, 11)
		}, []scriptSum{{row: "npm:a@1.0.0 shim_only", procs: []string{"12:npm_lifecycle"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			got := sumScripts(build(r.evs))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Build scripts = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestFileBounds(t *testing.T) {
	r := newRec("S")
	r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install")
	r.spawn(11, 10, "/bin/sh", "/w/node_modules/a", "sh", "-c", "x")
	for i := range maxFiles + 10 {
		r.file(11, "write", fmt.Sprintf("/w/node_modules/a/f%d", i))
	}
	r.file(11, "read", "/home/agent/.aws/credentials")
	v := build(r.evs)
	p := v.Packages[0]
	if len(p.Files) != maxFiles+1 || p.FilesOmitted != 10 || !p.Files[maxFiles].Sensitive {
		t.Errorf("Build files = %d (omitted %d), want %d and the sensitive one kept, 10 omitted", len(p.Files), p.FilesOmitted, maxFiles+1)
	}
}

func TestSensitive(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/home/agent/.npmrc", true},
		{"/home/agent/.ssh/id_rsa", true},
		{"/home/agent/.ssh", true},
		{"/root/.aws/credentials", true},
		{"/home/a/.config/gh/hosts.yml", true},
		{"/etc/shadow", true},
		{"/home/a/.git-credentials", true},
		{"/home/a/.pypirc", true},
		{"/home/a/.cargo/credentials.toml", true},
		{"/proc/1/environ", true},
		{"/w/node_modules/a/index.js", false},
		{"/etc/passwd", false},
		{"/home/a/.sshd", false},
	}
	for _, tt := range tests {
		if got := Sensitive(tt.path); got != tt.want {
			t.Errorf("Sensitive(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestManagerOf(t *testing.T) {
	tests := []struct {
		name string
		exe  string
		argv []string
		want manager
	}{
		{"npm", "/usr/bin/npm", []string{"npm"}, mgrNpm},
		{"npx", "/usr/local/bin/npx", nil, mgrNpm},
		{"node bin/npm", "/usr/bin/node", []string{"node", "/opt/node/bin/npm", "i"}, mgrNpm},
		{"node app", "/usr/bin/node", []string{"node", "app.js"}, 0},
		{"pip3.11", "/usr/bin/pip3.11", nil, mgrPip},
		{"pipx is not pip", "/usr/bin/pipx", nil, 0},
		{"python -m pip._internal", "/usr/bin/python3", []string{"python3", "-m", "pip._internal", "install"}, mgrPip},
		{"python -W x -m pip", "/usr/bin/python3", []string{"python3", "-W", "ignore", "-m", "pip"}, mgrPip},
		{"python -- pip", "/usr/bin/python3", []string{"python3", "--", "pip"}, mgrPip},
		{"cargo", "/home/a/.rustup/toolchains/stable/bin/cargo", nil, mgrCargo},
		{"apt", "/usr/bin/apt", nil, mgrApt},
		{"dpkg", "/usr/bin/dpkg", nil, mgrDpkg},
		{"dpkg-query is not dpkg", "/usr/bin/dpkg-query", nil, 0},
	}
	for _, tt := range tests {
		if got := managerOf(tt.exe, tt.argv); got != tt.want {
			t.Errorf("%s: managerOf(%q, %q) = %v, want %v", tt.name, tt.exe, tt.argv, got, tt.want)
		}
	}
}

func TestCompareHashes(t *testing.T) {
	tests := []struct {
		name             string
		a, b             string
		same, comparable bool
	}{
		{"sri equal", sriA, sriA, true, true},
		{"sri differ", sriA, sriB, false, true},
		{"sri against hex", sriA, "sha512:" + hexSriA, true, true},
		{"sri against bare hex", sriA, hexSriA, true, true},
		{"sha256 case", shaA, shaAUp, true, true},
		{"sha256 bare", shaA, hexA, true, true},
		{"sha256 differ", shaA, hexB, false, true},
		{"no shared algorithm", sriA, shaA, false, false},
		{"several sri, one shared", "sha1-" + "AAAAAAAAAAAAAAAAAAAAAAAAAAA= " + sriA, sriA + "?opt", true, true},
		{"empty", "", shaA, false, false},
		{"garbage", "sha256:zz", shaA, false, false},
	}
	for _, tt := range tests {
		same, comparable := compareHashes(tt.a, tt.b)
		if same != tt.same || comparable != tt.comparable {
			t.Errorf("%s: compareHashes(%q, %q) = %v, %v, want %v, %v", tt.name, tt.a, tt.b, same, comparable, tt.same, tt.comparable)
		}
	}
}
