package pkgview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

func TestManifestOf(t *testing.T) {
	tests := []struct {
		path string
		want string // eco/name@version^parent, "" for none
	}{
		{"/w/node_modules/left-pad/package.json", "npm/left-pad@"},
		{"/w/node_modules/@scope/n/package.json", "npm/@scope/n@"},
		{"/w/node_modules/a/node_modules/@s/b/package.json", "npm/@s/b@^a"},
		{"/w/node_modules/@s/a/node_modules/b/package.json", "npm/b@^@s/a"},
		{"/home/a/.npm/_npx/1f2e/node_modules/cowsay/package.json", "npm/cowsay@"},
		{"/w/package.json", ""},
		{"/w/node_modules/a/lib/package.json", ""},
		{"/w/node_modules/a/test/fixtures/node_modules/x/package.json", ""},
		{"/w/node_modules/.staging/a/package.json", ""},
		{"/w/node_modules/@scope/package.json", ""},
		{"/w/node_modules//package.json", ""},
		{"/w/node_modules/a/node_modules/package.json", ""},
		{"/home/a/.npm/_cacache/tmp/package.json", ""},
		{"/usr/lib/python3/dist-packages/requests-2.31.0.dist-info/METADATA", "pypi/requests@2.31.0"},
		{"/tmp/pip-target-x/lib/python/fixture_pkg-1.5.dist-info/RECORD", "pypi/fixture_pkg@1.5"},
		{"/tmp/pip-modern-metadata-x/fixture_pkg-1.5.dist-info/METADATA", ""},
		{"/w/site-packages/nover.dist-info/METADATA", ""},
		{"/w/site-packages/x-1.0.dist-info/WHEEL", ""},
		{"/home/a/.cargo/registry/src/index.crates.io-6f17d22bba15001f/serde-1.0.200/Cargo.toml", "cargo/serde@1.0.200"},
		{"/home/a/.cargo/registry/src/idx/md-5-0.10.5/Cargo.toml", "cargo/md-5@0.10.5"},
		{"/home/a/.cargo/registry/src/idx/x-1.0.0-alpha.1/Cargo.toml", "cargo/x@1.0.0-alpha.1"},
		{"/w/crates/x-1.0.0/Cargo.toml", ""},
		{"/w/Cargo.toml", ""},
		{"/var/lib/dpkg/info/hello.list", "deb/hello@"},
		{"/var/lib/dpkg/info/libc6:amd64.list", "deb/libc6@"},
		{"/var/lib/dpkg/info/hello.list-new", ""},
		{"/tmp/var/lib/dpkg/info/hello.list", ""},
		{"/w/x.list", ""},
	}
	for _, tt := range tests {
		got := ""
		if m, ok := manifestOf(tt.path); ok {
			got = m.eco + "/" + m.name + "@" + m.version
			if m.parent != "" {
				got += "^" + m.parent
			}
		}
		if got != tt.want {
			t.Errorf("manifestOf(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func FuzzManifestOf(f *testing.F) {
	for _, s := range []string{"/w/node_modules/@s/n/node_modules/x/package.json",
		"/x/site-packages/a-1.dist-info/METADATA", "/r/registry/src/i/md-5-0.10.5/Cargo.toml",
		"/var/lib/dpkg/info/a:b.list", "/node_modules/@/package.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		m, ok := manifestOf(p)
		if !ok {
			return
		}
		if m.name == "" || m.eco == "" || strings.Contains(m.name, "\x00") && !strings.Contains(p, "\x00") {
			t.Fatalf("manifestOf(%q) = %+v", p, m)
		}
		if !strings.Contains(p, m.name) {
			t.Fatalf("manifestOf(%q): name %q is not in the path", p, m.name)
		}
	})
}

// create records a file.create by pid, as the collector writes it.
func (r *rec) create(pid int32, path string) *event.Event {
	return r.add(event.KindFileCreate, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid}
		e.File = &event.File{Op: "create", Path: path, Result: event.I64(3)}
	})
}

func (r *rec) rename(pid int32, from, to string) *event.Event {
	return r.add(event.KindFileRename, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid}
		e.File = &event.File{Op: "rename", Path: from, NewPath: to, Result: event.I64(0)}
	})
}

// shimmedNpm is an install through the shim: the shim (pid 10) runs npm
// (pid 11) as its child.
func shimmedNpm(r *rec) {
	r.spawn(10, 1, shimNpm, "/w", "npm", "install", "x")
	r.spawn(11, 10, "/usr/bin/node", "/w", "node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "install", "x")
}

func TestInstalledFromKernel(t *testing.T) {
	tests := []struct {
		name   string
		events func(r *rec)
		want   []string
	}{
		{"a clean shimmed install: served verified, claimed", func(r *rec) {
			shimmedNpm(r)
			bundling(r.fetch("npm", "x", "1.0.0", sriA, "served"), "bundled")
			r.create(11, "/w/node_modules/x/package.json")
			r.create(11, "/w/node_modules/x/lib/package.json")
			r.create(11, "/w/node_modules/x/node_modules/bundled/package.json")
			r.create(11, "/w/package.json")
			r.exit(11)
			r.install("npm", "x", "1.0.0", sriA, 11)
			r.exit(10)
		}, nil},
		{"a bundled dependency unpacked before its parent's package.json", func(r *rec) {
			shimmedNpm(r)
			bundling(r.fetch("npm", "x", "1.0.0", sriA, "served"), "bundled")
			r.create(11, "/w/node_modules/x/node_modules/bundled/package.json")
			r.create(11, "/w/node_modules/x/package.json")
			r.exit(11)
			r.exit(10)
		}, nil},
		{"a package nested in a verified one whose fetch does not list it as bundled", func(r *rec) {
			shimmedNpm(r)
			bundling(r.fetch("npm", "lodash", "4.17.21", sriA, "served"), "other")
			r.create(11, "/w/node_modules/lodash/package.json")
			r.create(11, "/w/node_modules/lodash/node_modules/evil/package.json") // 6
			r.exit(11)
			r.exit(10)
		}, []string{"unverified_install[6]"}},
		{"the exploit: a shim's bundled claim of what the carrier's fetch does not bundle", func(r *rec) {
			shimmedNpm(r)
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
			r.create(11, "/w/node_modules/lodash/package.json")
			r.create(11, "/w/node_modules/lodash/node_modules/evil/package.json")
			r.exit(11)
			r.installAt("lodash", "4.17.21", sriA, "node_modules/lodash", "", 11)
			r.installAt("evil", "6.6.6", "", "node_modules/lodash/node_modules/evil", "pkg:npm/lodash@4.17.21", 11) // 9
			r.exit(10)
		}, []string{"unverified_install[9]"}},
		{"the shim killed after its check: the kernel's account alone", func(r *rec) {
			shimmedNpm(r)
			r.exit(10)
			r.create(11, "/w/node_modules/evil/package.json") // 5
			r.exit(11)                                        // 6
		}, []string{"unverified_install[5]"}},
		{"a manager run by a package's script with its own registry", func(r *rec) {
			shimmedNpm(r)
			r.fetch("npm", "x", "1.0.0", sriA, "served")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/x", "sh", "-c", "node $npm_execpath install y")
			r.spawn(13, 12, "/usr/bin/node", "/w/node_modules/x", "node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "install", "y")
			r.create(11, "/w/node_modules/x/package.json")
			r.create(13, "/w/node_modules/x/node_modules/y/package.json") // 10: nested in x, but not by the process that unpacked x
			r.create(13, "/w/node_modules/z/package.json")
			r.exit(13)
			r.exit(12)
			r.exit(11)
			r.install("npm", "x", "1.0.0", sriA, 11)
			r.exit(10) // the shim's exit decides
		}, []string{"unverified_install[10]", "unverified_install[11]"}},
		{"the shim's claim raises it first; the kernel's is not repeated", func(r *rec) {
			shimmedNpm(r)
			r.create(11, "/w/node_modules/x/package.json")
			r.exit(11)
			r.install("npm", "x", "1.0.0", sriA, 11) // 6
			r.exit(10)
		}, []string{"unverified_install[6]"}},
		{"a fetch served but not verified accounts for nothing", func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install") // 1: bypass
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "x", Resolved: "1.0.0", Outcome: "served", Verified: event.Bool(false)}
			})
			r.create(10, "/w/node_modules/x/package.json") // 3
			r.exit(10)
		}, []string{"shim_bypass[1]", "unverified_install[3]"}},
		{"a forged fetch (not the mirror's) accounts for nothing", func(r *rec) {
			shimmedNpm(r)
			r.add(event.KindPkgFetch, event.SourceShim, func(e *event.Event) {
				e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "x", Resolved: "1.0.0", Outcome: "served", Verified: event.Bool(true)}
			})
			r.create(11, "/w/node_modules/x/package.json") // 5
			r.exit(11)
			r.exit(10)
		}, []string{"unverified_install[5]"}},
		{"pip: RECORD renamed into place, the served version and another", func(r *rec) {
			r.spawn(10, 1, testShimDir+"/pip", "/w", "pip", "install", "a")
			r.spawn(11, 10, "/usr/bin/python3", "/w", "python3", "/usr/bin/pip", "install", "a")
			r.fetch("pypi", "A", "1.0", shaA, "served")
			r.rename(11, "/t/lib/python/a-1.0.dist-info/RECORD.tmp", "/t/lib/python/a-1.0.dist-info/RECORD")
			r.create(11, "/tmp/pip-modern-metadata-1/b-2.0.dist-info/METADATA")
			r.rename(11, "/t/lib/python/a-2.0.dist-info/RECORD.tmp", "/t/lib/python/a-2.0.dist-info/RECORD") // 7
			r.exit(11)
			r.exit(10)
		}, []string{"unverified_install[7]"}},
		{"cargo: a crate unpacked that the mirror never served", func(r *rec) {
			r.spawn(10, 1, testShimDir+"/cargo", "/w", "cargo", "build")
			r.spawn(11, 10, "/root/.cargo/bin/cargo", "/w", "cargo", "build")
			r.fetch("cargo", "serde", "1.0.200", shaA, "served")
			r.create(11, "/h/.cargo/registry/src/idx/serde-1.0.200/Cargo.toml")
			r.create(11, "/h/.cargo/registry/src/idx/md-5-0.10.5/Cargo.toml") // 6
			r.exit(11)
			r.exit(10)
		}, []string{"unverified_install[6]"}},
		{"the host's dpkg is the host's", func(r *rec) {
			r.add(event.KindFork, event.SourceKernel, func(e *event.Event) { e.Proc = &event.Proc{Pid: 10, PPid: 1} })
			r.add(event.KindExec, event.SourceKernel, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 10, PPid: 1, Exe: "/usr/bin/dpkg", Argv: []string{"dpkg", "-i"}, UID: event.U32(0)}
			})
			r.rename(10, "/var/lib/dpkg/info/hello.list-new", "/var/lib/dpkg/info/hello.list")
			r.exit(10)
		}, nil},
		{"the record ends before the manager's exit: decided at the end", func(r *rec) {
			shimmedNpm(r)
			r.create(11, "/w/node_modules/x/package.json") // 4
		}, []string{"unverified_install[4]"}},
		{"one alert per package", func(r *rec) {
			shimmedNpm(r)
			r.create(11, "/w/node_modules/x/package.json") // 4
			r.create(11, "/w/node_modules/a/node_modules/x/package.json")
			r.exit(11)
			r.spawn(12, 1, "/usr/bin/node", "/w", "node", "x.js")
			r.create(12, "/w2/node_modules/x/package.json")
			r.exit(12)
			r.exit(10)
		}, []string{"unverified_install[4]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			checkAlerts(t, r, tt.want)
		})
	}
}

// checkAlerts checks the alerts that Build raises over r's events, and
// that a Watcher raises the same, live and at the session's end.
func checkAlerts(t *testing.T, r *rec, want []string, opts ...Option) {
	t.Helper()
	v := build(r.evs, opts...)
	if got := alertSum(v.Alerts); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alerts %v, want %v", got, want)
		for _, a := range v.Alerts {
			t.Logf("%s", a.Alert.Summary)
		}
	}
	w := newWatcher(opts...)
	var live []*event.Event
	for _, e := range r.evs {
		live = append(live, w.Add(e)...)
	}
	live = append(live, w.Add(&event.Event{SessionID: "S", Kind: event.KindSessionTerminate, Seq: uint64(len(r.evs))})...)
	if got := alertSum(live); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Watcher alerts %v, want %v", got, want)
	}
}

// claim records a shim's pkg.install of a package from source, sent by
// process pid (the ingest server's peer).
func (r *rec) claim(pid int32, eco, name, version, source string) *event.Event {
	return r.add(event.KindPkgInstall, event.SourceShim, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid, UID: event.U32(1000)}
		e.Pkg = &event.Pkg{Manager: "m", Ecosystem: eco, Name: name, Resolved: version, SourceURL: source, Direct: event.Bool(true)}
	})
}

// venv is `python3 -m venv /h/v` (pid 10, no shim), whose ensurepip (pid
// 11) installs the wheels the host bundles.
func venv(r *rec, pip string) {
	r.spawn(10, 1, "/usr/bin/python3.11", "/h", "python3", "-m", "venv", "/h/v")
	r.spawn(11, 10, "/h/v/bin/python3", "/h", "/h/v/bin/python3", "-m", "ensurepip", "--upgrade", "--default-pip")
	r.create(11, "/h/v/lib/python3.11/site-packages/setuptools-66.1.1.dist-info/RECORD") // 4
	r.create(11, "/h/v/lib/python3.11/site-packages/"+pip+".dist-info/RECORD")           // 5
	r.exit(11)
	r.exit(10)
}

// shimmedPip is `pip install -e .` through the shim: the shim (pid 10)
// runs pip (pid 11), which installs the project's own dist-info.
func shimmedPip(r *rec) {
	r.spawn(10, 1, testShimDir+"/pip", "/h/proj", "pip", "install", "-e", ".")
	r.spawn(11, 10, "/usr/bin/python3", "/h/proj", "python3", "/usr/bin/pip", "install", "-e", ".")
	r.create(11, "/h/t/my_proj-0.1.dist-info/RECORD") // 4
	r.exit(11)
}

func TestInstalledExempt(t *testing.T) {
	wheels := WithSystemWheels(SystemWheel{"pip", "23.0.1"}, SystemWheel{"setuptools", "66.1.1"})
	tests := []struct {
		name   string
		events func(r *rec)
		opts   []Option
		want   []string
	}{
		{"venv's ensurepip installs the host's wheels", func(r *rec) { venv(r, "pip-23.0.1") },
			[]Option{wheels}, nil},
		{"the host's wheels unnamed: each alerts", func(r *rec) { venv(r, "pip-23.0.1") },
			nil, []string{"unverified_install[4]", "unverified_install[5]"}},
		{"another version than the host's wheel alerts", func(r *rec) { venv(r, "pip-24.0") },
			[]Option{wheels}, []string{"unverified_install[5]"}},
		{"pip install -e .: the shim claims the project from a local path", func(r *rec) {
			shimmedPip(r)
			r.claim(10, "pypi", "my-proj", "0.1", "file:///h/proj")
			r.exit(10)
		}, nil, nil},
		{"npm install ./x.tgz: the shim claims it from a local file", func(r *rec) {
			shimmedNpm(r)
			r.create(11, "/w/node_modules/x/package.json")
			r.exit(11)
			r.claim(10, "npm", "x", "1.0.0", "file:x.tgz")
			r.exit(10)
		}, nil, nil},
		{"a claim from the registry exempts nothing", func(r *rec) {
			shimmedPip(r)
			r.claim(10, "pypi", "my-proj", "0.1", "https://files.example.invalid/my_proj-0.1.whl") // 6: the claim rule's
			r.exit(10)
		}, nil, []string{"unverified_install[6]"}},
		{"a local claim of another version exempts nothing", func(r *rec) {
			shimmedPip(r)
			r.claim(10, "pypi", "my-proj", "0.2", "file:///h/proj")
			r.exit(10)
		}, nil, []string{"unverified_install[4]"}},
		{"a local claim sent by another process than the deciding shim", func(r *rec) {
			shimmedPip(r)
			r.claim(5, "pypi", "my-proj", "0.1", "file:///h/proj")
			r.exit(10)
		}, nil, []string{"unverified_install[4]"}},
		{"a process with no shim claims what it installed itself", func(r *rec) {
			r.spawn(10, 1, "/usr/bin/python3", "/h", "python3", "x.py")
			r.create(10, "/h/t/evil-1.0.dist-info/RECORD") // 2
			r.claim(10, "pypi", "evil", "1.0", "file:///h/evil")
			r.exit(10)
		}, nil, []string{"unverified_install[2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			checkAlerts(t, r, tt.want, tt.opts...)
		})
	}
}

func TestInstalledAlertNamesThePackage(t *testing.T) {
	r := newRec("S")
	shimmedNpm(r)
	r.exit(10)
	r.create(11, "/w/node_modules/@s/evil/package.json")
	r.exit(11)
	v := build(r.evs)
	if len(v.Alerts) != 1 {
		t.Fatalf("alerts %v, want one", alertSum(v.Alerts))
	}
	a := v.Alerts[0].Alert
	if a.RuleID != RuleUnverified || a.Level != "high" || !strings.Contains(a.Summary, "npm @s/evil was installed") ||
		!strings.Contains(a.Summary, "pid 11") {
		t.Errorf("alert %+v, want unverified_install (high) naming npm @s/evil and pid 11", *a)
	}
}

// BenchmarkInstalledFile is the per-event cost of the read-back for the
// common file event, which names no manifest.
func BenchmarkInstalledFile(b *testing.B) {
	s := newState("S", defaults(nil), true)
	e := &event.Event{Kind: event.KindFileCreate, SessionID: "S", Proc: &event.Proc{Pid: 11},
		File: &event.File{Op: "create", Path: "/w/node_modules/x/lib/index.js", Result: event.I64(3)}}
	for b.Loop() {
		s.installedFile(e)
	}
}
