package pkgview

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// execFile is an exec with the file the kernel executed (exe_path): the
// binary, or a #! script's interpreter.
func (r *rec) execFile(pid, ppid int32, exe, exePath, cwd string, argv ...string) *event.Event {
	return r.add(event.KindExec, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: pid, PPid: ppid, Exe: exe, ExePath: exePath, Cwd: cwd, Argv: argv, UID: event.U32(1000)}
	})
}

// nodeRuns is a process that runs node on script, by the name exe.
func (r *rec) nodeRuns(pid, ppid int32, exe string, argv ...string) {
	r.fork(pid, ppid)
	r.execFile(pid, ppid, exe, "/usr/bin/node", "/w", argv...)
}

const (
	npmLib   = "/usr/lib/node_modules/npm/lib/cli.js"
	npmCore  = "/usr/lib/node_modules/npm/lib/npm.js"
	pipMain  = "/usr/lib/python3/dist-packages/pip/_internal/cli/__pycache__/main.cpython-311.pyc"
	corepack = "/usr/lib/node_modules/corepack/dist/lib/corepack.cjs"
)

// TestBypassByWhatTheKernelSaw: a manager started under a name the argv
// rule does not know is still a bypass, by the manager's core module its
// interpreter read; the shim's own chain reading the same modules, and tools that
// only read them, are not.
func TestBypassByWhatTheKernelSaw(t *testing.T) {
	tests := []struct {
		name   string
		events func(r *rec)
		want   []string
	}{
		{"a symlink named mynpm to npm-cli.js", func(r *rec) {
			r.fork(10, 1)
			// The kernel records a #! script's interpreter as the file it
			// executed, not the script: only the module read names npm.
			r.execFile(10, 1, "/home/a/bin/mynpm", "/usr/bin/env", "/w", "/usr/bin/env", "node", "/home/a/bin/mynpm", "install")
			r.execFile(10, 1, "/usr/bin/node", "/usr/bin/node", "/w", "node", "/home/a/bin/mynpm", "install")
			r.file(10, "read", npmLib)
		}, []string{"shim_bypass[3]"}},
		{"node running a wrapper of npm's lib/cli.js", func(r *rec) {
			r.nodeRuns(10, 1, "/usr/bin/node", "node", "/home/a/bin/tool", "install")
			r.file(10, "read", npmLib)
			r.file(10, "read", npmCore)
		}, []string{"shim_bypass[2]"}},
		{"python running a copy of the pip script named mypip", func(r *rec) {
			r.fork(10, 1)
			r.execFile(10, 1, "/home/a/bin/mypip", "/usr/bin/python3.11", "/w", "/usr/bin/python3", "/home/a/bin/mypip", "install", "x")
			r.file(10, "read", pipMain)
		}, []string{"shim_bypass[2]"}},
		{"a renamed node is still named node by nothing: no read alert", func(r *rec) {
			r.fork(10, 1)
			r.execFile(10, 1, "/home/a/bin/x", "/home/a/bin/x", "/w", "x", "/home/a/bin/tool")
			r.file(10, "read", npmLib)
		}, nil},
		{"cp and grep reading npm's modules", func(r *rec) {
			r.spawn(10, 1, "/usr/bin/cp", "/w", "cp", "-r", "/usr/lib/node_modules/npm", "/home/a/npm")
			r.file(10, "read", npmLib)
			r.spawn(11, 1, "/usr/bin/grep", "/w", "grep", "-r", "x", "/usr/lib/python3/dist-packages/pip")
			r.file(11, "read", pipMain)
		}, nil},
		{"the shim's npm reading its modules", func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "install")
			r.fork(11, 10)
			r.execFile(11, 10, "/usr/bin/npm", "/usr/bin/env", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install")
			r.execFile(11, 10, "/usr/bin/node", "/usr/bin/node", "/w", "node", "/usr/bin/npm", "install")
			r.file(11, "read", npmLib)
			r.nodeRuns(12, 11, "/usr/bin/node", "node", "/w/node_modules/a/install.js")
			r.file(12, "read", npmCore)
		}, nil},
		{"the shim's pip and its build backends", func(r *rec) {
			r.spawn(10, 1, testShimDir+"/pip", "/w", "pip", "install", "x")
			r.fork(11, 10)
			r.execFile(11, 10, "/usr/bin/pip", "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "x")
			r.execFile(11, 10, "/usr/bin/python3", "/usr/bin/python3.11", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "x")
			r.file(11, "read", pipMain)
			r.fork(12, 11)
			r.execFile(12, 11, "/usr/bin/python3", "/usr/bin/python3.11", "/tmp/pip-req-build-x", "python3", "_in_process.py")
			r.file(12, "read", pipMain)
		}, nil},
		{"a module read after the exec alert is the same bypass", func(r *rec) {
			r.fork(10, 1)
			r.execFile(10, 1, "/usr/bin/npm", "/usr/bin/env", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install")
			r.file(10, "read", npmLib)
		}, []string{"shim_bypass[1]"}},
		{"corepack pnpm, and the pnpm corepack enable links", func(r *rec) {
			r.fork(10, 1)
			r.execFile(10, 1, "/usr/bin/corepack", "/usr/bin/env", "/w", "/usr/bin/env", "node", "/usr/bin/corepack", "pnpm", "add", "x")
			r.file(10, "read", corepack)
			r.exit(10)
			r.fork(11, 1)
			r.execFile(11, 1, "/home/a/bin/pnpm", "/usr/bin/env", "/w", "/usr/bin/env", "node", "/home/a/bin/pnpm", "add", "y")
			r.exit(11)
			r.nodeRuns(12, 1, "/usr/bin/node", "node", "/home/a/.cache/node/corepack/v1/pnpm/10.0.0/bin/pnpm.cjs", "add", "z")
		}, []string{"shim_bypass[1]", "shim_bypass[5]", "shim_bypass[8]"}},
		{"a forked python (no exec) importing pip", func(r *rec) {
			r.fork(10, 1)
			r.execFile(10, 1, "/usr/bin/python3", "/usr/bin/python3.11", "/w", "python3", "/w/x.py")
			r.fork(11, 10)
			r.file(11, "read", pipMain)
		}, []string{"shim_bypass[3]"}},
		{"a write of the module is no run of it", func(r *rec) {
			r.nodeRuns(10, 1, "/usr/bin/node", "node", "/w/x.js")
			r.file(10, "write", npmLib)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			if got := alertSum(build(r.evs).Alerts); !slices.Equal(got, tt.want) {
				t.Errorf("Build alerts = %v, want %v", got, tt.want)
			}
			w := newWatcher()
			var live []*event.Event
			for _, e := range r.evs {
				live = append(live, w.Add(e)...)
			}
			if got := alertSum(live); !slices.Equal(got, tt.want) {
				t.Errorf("Watcher alerts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestModuleReadAlert(t *testing.T) {
	r := newRec("S")
	r.nodeRuns(10, 1, "/usr/bin/node", "node", "/home/a/bin/tool")
	r.evs[1].Proc.Comm = "node"
	r.add(event.KindFileRead, event.SourceKernel, func(e *event.Event) {
		e.Proc = &event.Proc{Pid: 10, Comm: "node"}
		e.File = &event.File{Op: "read", Path: npmLib}
	})
	v := build(r.evs)
	if len(v.Alerts) != 1 {
		t.Fatalf("Build alerts = %v, want one", alertSum(v.Alerts))
	}
	a := v.Alerts[0]
	if err := a.Validate(); err != nil {
		t.Errorf("alert does not validate: %v", err)
	}
	for _, want := range []string{"npm ran", "pid 10 (node)", "read " + npmLib} {
		if !strings.Contains(a.Alert.Summary, want) {
			t.Errorf("alert summary %q lacks %q", a.Alert.Summary, want)
		}
	}
}

func TestManagerOfNewNames(t *testing.T) {
	tests := []struct {
		exe  string
		argv []string
		want manager
	}{
		{"/usr/bin/corepack", []string{"corepack", "enable"}, mgrCorepack},
		{"/usr/bin/node", []string{"node", "/usr/lib/node_modules/corepack/dist/pnpm.js", "add"}, mgrCorepack},
		{"/usr/bin/node", []string{"node", "/usr/lib/node_modules/npm/bin/npx-cli.js"}, mgrNpm},
		{"/usr/bin/node", []string{"node", "/c/pnpm/10.0.0/bin/pnpm.cjs"}, mgrPnpm},
		{"/usr/bin/node", []string{"node", ".yarn/releases/yarn-4.1.0.cjs", "install"}, mgrYarn},
		{"/usr/local/bin/pnpm", nil, mgrPnpm},
		{"/usr/bin/yarnpkg", nil, mgrYarn},
		{"/usr/bin/node", []string{"node", "yarn-server.js"}, 0},
		{"/usr/bin/node", []string{"node", "/w/corepack/dist/other.js"}, 0},
	}
	for _, tt := range tests {
		if got := managerOf(tt.exe, tt.argv); got != tt.want {
			t.Errorf("managerOf(%q, %q) = %v, want %v", tt.exe, tt.argv, got, tt.want)
		}
	}
	for p, want := range map[string]manager{npmLib: mgrNpm, npmCore: mgrNpm, pipMain: mgrPip, corepack: mgrCorepack,
		"/usr/lib/python3/dist-packages/pip/_internal/cli/main.py": mgrPip, "/usr/lib/node_modules/npm/lib/utils/x.js": 0,
		"/w/node_modules/npm-run-all/lib/cli.js": 0} {
		if got := managerModule(p); got != want {
			t.Errorf("managerModule(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestDynamicLoader: a manager run through the dynamic loader
// (`ld-linux-x86-64.so.2 /usr/bin/node npm-cli.js`) is the manager, and the
// interpreter it loads is the image whose modules it may read.
func TestDynamicLoader(t *testing.T) {
	const ld = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
	for _, tt := range []struct {
		exe  string
		argv []string
		want manager
	}{
		{ld, []string{ld, "/usr/bin/node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "install", "x"}, mgrNpm},
		{ld, []string{ld, "--library-path", "/x", "--argv0", "npm", "/usr/bin/python3", "-m", "pip", "install", "x"}, mgrPip},
		{"/lib/ld-musl-x86_64.so.1", []string{"ld", "--", "/usr/bin/npm", "ci"}, mgrNpm},
		{ld, []string{ld, "--list", "/usr/bin/npm"}, mgrNpm},
		{ld, []string{ld, "/usr/bin/ls", "npm"}, 0},
		{ld, []string{ld}, 0},
		{"/usr/bin/ld", []string{"ld", "/usr/bin/npm"}, 0},
	} {
		if got := managerOf(tt.exe, tt.argv); got != tt.want {
			t.Errorf("managerOf(%q, %q) = %v, want %v", tt.exe, tt.argv, got, tt.want)
		}
	}
	if got := interpreterOf(&event.Proc{Exe: ld, ExePath: ld, Argv: []string{ld, "/usr/bin/node", "/tmp/x.js"}}); got&mgrNpm == 0 {
		t.Errorf("interpreterOf(ld.so node) = %v, want node's managers", got)
	}
	if got := interpreterOf(&event.Proc{Exe: ld, ExePath: ld, Argv: []string{ld, "/usr/bin/cat", "/usr/lib/node_modules/npm/lib/cli.js"}}); got != 0 {
		t.Errorf("interpreterOf(ld.so cat) = %v, want none", got)
	}
}
