package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// toolchain is a Rust toolchain that the agent user can run.
type toolchain struct{ cargo, rustc string }

// rust is the toolchain shared by the tests that use it (rustToolchain):
// made when the first of them starts, removed when the last one ends.
var rust struct {
	mu    sync.Mutex
	users int
	dir   string // the shared copy; "" when the toolchain was reachable as it is
	tc    toolchain
}

// rustToolchain finds the stable Rust toolchain (rustc --print sysroot of
// the rustc on PATH or in ~/.cargo/bin) and makes it reachable by the
// agent, as a sandbox image would have it: a toolchain in a directory the
// agent cannot traverse (rustup's, in root's home) is hard-linked (or, on
// another filesystem, copied) into a shared 0755 directory. It skips the
// test when there is no toolchain.
func rustToolchain(t *testing.T) toolchain {
	t.Helper()
	rust.mu.Lock()
	defer rust.mu.Unlock()
	if rust.users == 0 {
		sysroot, err := rustSysroot()
		if err != nil {
			t.Skipf("no Rust toolchain: %v", err)
		}
		if agentReaches(filepath.Join(sysroot, "bin", "cargo")) {
			rust.tc = toolchain{filepath.Join(sysroot, "bin", "cargo"), filepath.Join(sysroot, "bin", "rustc")}
		} else if rust.dir, err = shareToolchain(sysroot); err != nil {
			t.Fatalf("sharing the Rust toolchain with the agent: %v", err)
		} else {
			rust.tc = toolchain{filepath.Join(rust.dir, "bin", "cargo"), filepath.Join(rust.dir, "bin", "rustc")}
		}
	}
	rust.users++
	t.Cleanup(func() {
		rust.mu.Lock()
		defer rust.mu.Unlock()
		if rust.users--; rust.users == 0 && rust.dir != "" {
			if err := os.RemoveAll(rust.dir); err != nil {
				t.Logf("removing the shared toolchain: %v", err)
			}
			rust.dir = ""
		}
	})
	return rust.tc
}

// rustSysroot is the stable toolchain's directory, with bin/cargo and
// bin/rustc.
func rustSysroot() (string, error) {
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		home, _ := os.UserHomeDir()
		rustc = filepath.Join(home, ".cargo", "bin", "rustc")
	}
	cmd := exec.Command(rustc, "--print", "sysroot")
	cmd.Env = append(os.Environ(), "RUSTUP_TOOLCHAIN=stable")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --print sysroot: %w", rustc, err)
	}
	sysroot := strings.TrimSpace(string(out))
	for _, b := range []string{"cargo", "rustc"} {
		if _, err := os.Stat(filepath.Join(sysroot, "bin", b)); err != nil {
			return "", fmt.Errorf("the toolchain at %s has no %s: %w", sysroot, b, err)
		}
	}
	return sysroot, nil
}

// agentReaches reports whether others may traverse every directory above
// path and execute it.
func agentReaches(path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// shareToolchain puts what cargo build needs of the toolchain at sysroot
// (bin and lib: rustc's libraries, std and the linker) into a new 0755
// directory: hard links on the same filesystem, else a copy.
func shareToolchain(sysroot string) (string, error) {
	dir, err := os.MkdirTemp("", "sandtrail-e2e-rust-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	flags := "-a"
	var src, dst syscall.Stat_t
	if syscall.Stat(sysroot, &src) == nil && syscall.Stat(dir, &dst) == nil && src.Dev == dst.Dev {
		flags = "-al"
	}
	out, err := exec.Command("cp", flags, filepath.Join(sysroot, "bin"), filepath.Join(sysroot, "lib"), dir).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("cp %s: %v\n%s", flags, err, out)
	}
	return dir, nil
}

// buildScript is fx-script's build.rs: it writes
// $OUT_DIR/fx-script-was-here and connects to 127.0.0.1:port.
func buildScript(port int) string {
	return fmt.Sprintf(`fn main() {
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(format!("{}/fx-script-was-here", out), "built").expect("writing OUT_DIR");
    let _ = std::net::TcpStream::connect("127.0.0.1:%d");
}
`, port)
}

// cargoBuild is a session script: cargo build of a new project of the
// session's home that depends on deps (Cargo.toml lines) and uses
// fx_mid and fx_script.
func cargoBuild(deps ...string) string {
	return `set -e; mkdir -p "$HOME/p/src" && cd "$HOME/p"
cat >Cargo.toml <<'EOF'
[package]
name = "p"
version = "0.1.0"
edition = "2021"

[dependencies]
` + strings.Join(deps, "\n") + `
EOF
echo 'pub use fx_mid::version; pub use fx_script::version as script_version;' >src/lib.rs
cargo build >cargo.out 2>&1 || { cat cargo.out; exit 3; }`
}

// cargoEnv is the --env flags that give a session the toolchain tc.
func cargoEnv(tc toolchain) []string {
	return []string{"--env", "SANDTRAIL_REAL_CARGO=" + tc.cargo, "--env", "RUSTC=" + tc.rustc, "--env", "CARGO_TERM_COLOR=never"}
}

// TestShimCargoBuild: a real `cargo build` through the shim and the mirror,
// from a loopback fixture index, of a project depending on fx-mid = "0.2"
// (which depends on fx-leaf) and fx-script, whose build script writes into
// OUT_DIR and connects to a loopback port. Each crate has a pkg.install
// with what was asked for, what was resolved and the index's checksum,
// joined with the mirror's verified fetch; `sandtrail packages` shows the
// build script's process, its write and its connection under fx-script.
func TestShimCargoBuild(t *testing.T) {
	t.Parallel()
	tc := rustToolchain(t)
	ln, accepted := testnet.StartCountingServer(t, "tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	leafDep := []cratestest.Dep{{Name: "fx-leaf", Req: "^1"}}
	crates := []cratestest.Crate{
		{Name: "fx-leaf", Versions: []cratestest.Version{{Version: "1.0.0"}}},
		{Name: "fx-mid", Versions: []cratestest.Version{{Version: "0.2.0", Deps: leafDep}, {Version: "0.2.1", Deps: leafDep}, {Version: "0.3.0"}}},
		{Name: "fx-script", Versions: []cratestest.Version{{Version: "0.1.0", Files: map[string]string{"build.rs": buildScript(port)}}}},
	}
	ix := cratestest.Start(t, crates...)
	e := newEnv(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("mirror:\n  upstreams:\n    cargo: "+ix.URL+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	pol := writePolicy(t, "sources:\n  registries:\n    cargo: ["+ix.URL+"/]\n")
	args := append([]string{"--user", "nobody", "--timeout", "10m", "--policy", pol}, cargoEnv(tc)...)
	r := e.run(append(args, "--", "sh", "-c", cargoBuild(`fx-mid = "0.2"`, `fx-script = "0.1"`))...)
	if r.code != 0 {
		t.Fatalf("cargo build through the shim: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "fx-script's build script's connection", func() bool { return accepted.Load() > 0 })
	evs := e.events(r.summary.SessionID)
	checkCargoInstalls(t, evs, crates, map[string]struct{ requested, by string }{
		"fx-mid@0.2.1": {"0.2", ""}, "fx-leaf@1.0.0": {"", "fx-mid"}, "fx-script@0.1.0": {"0.1", ""}})
	checkBuildScript(t, e.packagesView(r.summary.SessionID), port)
	if t.Failed() {
		t.Logf("pkg events:\n%s", e.pkgEvents(r.summary.SessionID))
	}
	e.verify()
}

// checkCargoInstalls checks the session's pkg.install events against want
// (name@version → requested spec and requested_by): manager cargo, the
// sha256 of the fixture's .crate, and a verified pkg.fetch of it.
func checkCargoInstalls(t *testing.T, evs []*event.Event, crates []cratestest.Crate, want map[string]struct{ requested, by string }) {
	t.Helper()
	sums := map[string]string{}
	for _, c := range crates {
		for _, v := range c.Versions {
			sums[c.Name+"@"+v.Version] = cratestest.Cksum(cratestest.CrateFile(c.Name, v))
		}
	}
	got, served := installs(evs), fetches(evs)
	if len(got) != len(want) {
		t.Errorf("%d pkg.install events, want %d", len(got), len(want))
	}
	nobody := uint32(65534)
	for id, w := range want {
		in := got[id]
		if in == nil {
			t.Errorf("no pkg.install of %s", id)
			continue
		}
		p, direct := in.Pkg, w.by == ""
		if p.Manager != "cargo" || p.Hash != "sha256:"+sums[id] || p.Requested != w.requested || p.RequestedBy != w.by ||
			p.Direct == nil || *p.Direct != direct || p.ManagerPid == 0 || p.Purl != "pkg:cargo/"+id {
			t.Errorf("%s: pkg.install %+v, want manager cargo, hash sha256:%s, requested %q, requested_by %q, direct %v",
				id, *p, sums[id], w.requested, w.by, direct)
		}
		if in.Source != event.SourceShim || in.Proc == nil || in.Proc.UID == nil || *in.Proc.UID != nobody {
			t.Errorf("%s: pkg.install source %s, proc %+v; want the shim's, as nobody", id, in.Source, in.Proc)
		}
		// The mirror writes a crate's hash as the shim does, "sha256:" and hex.
		f := served[id]
		if len(f) == 0 || f[0].Outcome != "served" || f[0].Verified == nil || !*f[0].Verified ||
			f[0].Hash != p.Hash {
			t.Errorf("%s: pkg.install does not join a verified pkg.fetch of its hash: %v", id, f)
		}
	}
}

// checkBuildScript checks that the packages view shows, under fx-script,
// its build script's process, the file it wrote and its connection to
// port; and no script processes under fx-mid.
func checkBuildScript(t *testing.T, v *pkgview.View, port int) {
	t.Helper()
	rows := map[string]*pkgview.Package{}
	for _, p := range v.Packages {
		rows[p.Name] = p
	}
	s := rows["fx-script"]
	if s == nil {
		t.Fatalf("no fx-script row in the packages view: %+v", v.Packages)
	}
	script, wrote, connected := false, false, false
	for _, p := range s.Processes {
		script = script || (p.Match == pkgview.MatchCargo && strings.HasSuffix(p.Exe, "/build-script-build"))
	}
	for _, f := range s.Files {
		wrote = wrote || ((f.Op == "create" || f.Op == "write") && strings.HasSuffix(f.Path, "/out/fx-script-was-here"))
	}
	for _, c := range s.Connections {
		connected = connected || (c.DstPort == uint16(port) && c.DstIP == "127.0.0.1")
	}
	if s.Seen != pkgview.SeenBoth || !script || !wrote || !connected {
		t.Errorf("fx-script: seen %s, build script process %v, wrote OUT_DIR/fx-script-was-here %v, connected to port %d %v;\n"+
			"processes %+v\nfiles %+v\nconnections %+v", s.Seen, script, wrote, port, connected, s.Processes, s.Files, s.Connections)
	}
	if m := rows["fx-mid"]; m == nil || len(m.Processes) != 0 {
		t.Errorf("fx-mid, which has no build script: %+v, want a row without processes", m)
	}
}

// TestShimCargoGitBlocked: `cargo install --git` from an unapproved URL is
// refused before cargo runs, with exit code 77, a message naming the rule
// and one pkg.blocked of the URL.
func TestShimCargoGitBlocked(t *testing.T) {
	t.Parallel()
	tc := rustToolchain(t)
	e := newEnv(t)
	const url = "https://example.invalid/x"
	args := append([]string{"--user", "nobody"}, cargoEnv(tc)...)
	r := e.run(append(args, "--", "sh", "-c", `cd "$HOME" && cargo install --git `+url)...)
	if r.code != 77 || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, "on_unknown_source") {
		t.Fatalf("cargo install --git %s: exit %d, want 77 with a message naming the rule\n%s", url, r.code, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	if b := kinds(evs, event.KindPkgBlocked); len(b) != 1 || b[0].Pkg.SourceURL != url || b[0].Pkg.Rule != "on_unknown_source" ||
		b[0].Pkg.Manager != "cargo" {
		t.Errorf("pkg.blocked = %s, want one of cargo for %s by on_unknown_source", e.pkgEvents(r.summary.SessionID), url)
	}
	shimRan := false
	for _, ev := range kinds(evs, event.KindExec) {
		switch exe := ev.Proc.Exe; {
		case strings.HasPrefix(exe, shimDir+"/"):
			shimRan = true
		case strings.HasSuffix(exe, "/cargo"): // tc.cargo, or any other
			t.Errorf("the real cargo ran: %s %q", exe, ev.Proc.Argv)
		}
	}
	if !shimRan {
		t.Error("no exec of the shim recorded")
	}
}
