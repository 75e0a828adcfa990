package daemon

import (
	"context"
	"fmt"

	"os"
	"path/filepath"
	"syscall"

	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt/broker"
)

// AptSocket is the apt broker's socket: apt.sock beside the ingest socket.
func (c *Config) AptSocket() string {
	return filepath.Join(c.SocketDir(), "apt.sock")
}

// OwnSockets are the daemon's sockets that a session's processes must
// reach whatever the policy says about unix sockets: the ingest socket, the
// tool API's and the apt broker's, as absolute paths.
func (c *Config) OwnSockets() []string {
	var out []string
	for _, p := range []string{c.Socket, c.APISocket(), c.AptSocket()} {
		if a, err := filepath.Abs(p); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// startApt serves the apt broker (docs/shims.md): a session's agent, not
// being root, has its apt installs run by the daemon, checked with the
// daemon's policy and recorded in its session. It needs apt-get and the shim
// binary (the broker's DPkg::Pre-Install-Pkgs hook), found through the
// shim directory's apt-get link.
func (d *Daemon) startApt(chk *checker) error {
	if _, err := os.Stat("/usr/bin/apt-get"); err != nil {
		return fmt.Errorf("apt broker: no apt-get here: %w", err)
	}
	shim, err := filepath.EvalSymlinks(filepath.Join(d.cfg.ShimDir, "apt-get"))
	if err != nil {
		return fmt.Errorf("apt broker: finding the shim binary for apt's hook: %w", err)
	}
	// apt runs the hook as root: nobody else may be able to replace it.
	for _, p := range []string{shim, filepath.Dir(shim)} {
		if err := rootOnly(p); err != nil {
			return fmt.Errorf("apt broker: the hook %s: %w", shim, err)
		}
	}
	if err := d.ids.MountErr(); err != nil {
		return fmt.Errorf("apt broker: %w", err)
	}
	aptConf, err := aptState(d.cfg.DataDir)
	if err != nil {
		return err
	}
	b, err := broker.New(broker.Config{Mirror: d.mirrorURL(), Emit: d.q.Emit, HookCmd: shim + " apt-hook", Host: d.cfg.Host, Log: d.log,
		Env: []string{"APT_CONFIG=" + aptConf},
		Check: func(ctx context.Context, session string, reqs []shims.Request) (bool, string, string) {
			return aptCheck(ctx, chk, session, reqs)
		},
		Attributor: d.ids,
		Nest:       d.aptCgroup})
	if err != nil {
		return err
	}
	ln, err := server.Listen(d.cfg.AptSocket(), 0o666)
	if err != nil {
		return fmt.Errorf("apt broker: %w", err)
	}
	d.apt = b
	go func() { _ = b.Serve(ln) }()
	return nil
}

// aptCgroup is the cgroup a session's apt request runs apt-get in: one
// nested in the session's (session.NewNested), so that apt-get, dpkg and
// the maintainer scripts are recorded in the session, beneath the broker in
// its process tree, and the mirror's attribution of apt's fetches (the
// peer socket's cgroup) names the session. They are root there: see
// docs/shims.md, "apt in the session".
func (d *Daemon) aptCgroup(id string) (broker.Cgroup, error) {
	s, ok := d.mgr.Get(id)
	if !ok {
		return nil, fmt.Errorf("no session %s", id)
	}
	return s.NewNested("apt")
}

// aptCheck decides an apt install's requests: blocked by the first block.
func aptCheck(ctx context.Context, chk *checker, session string, reqs []shims.Request) (blocked bool, rule, message string) {
	_, checks := shims.Checks(reqs, "apt", ecosystem.Deb)
	for i, v := range chk.Check(ctx, session, checks) {
		if v.Verdict == "block" {
			return true, v.Rule, fmt.Sprintf("%s: %s (rule %s)", checks[i].Name, v.Reason, v.Rule)
		}
	}
	return false, "", ""
}

// aptState makes the broker's own apt lists directory under dataDir and the
// apt.conf that points apt at it, and returns the file. The broker's apt
// fetches its indexes through the mirror, which serves a .deb only when a
// Packages file it verified lists it: lists that the machine's own
// `apt-get update` fetched past the mirror would leave it none to check.
// The machine's apt.conf.d still applies.
func aptState(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "apt")
	if err := os.MkdirAll(filepath.Join(dir, "lists", "partial"), 0o755); err != nil {
		return "", fmt.Errorf("apt broker: %w", err)
	}
	conf := filepath.Join(dir, "apt.conf")
	body := fmt.Sprintf("// written by sandtrail: the apt broker's own indexes, fetched through the mirror\nDir::State::Lists %q;\n",
		filepath.Join(dir, "lists")+"/")
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return "", fmt.Errorf("apt broker: %w", err)
	}
	return conf, nil
}

// rootOnly checks that p is owned by root and writable by nobody else.
func rootOnly(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s must be root's and writable by root alone (it is %v)", p, fi.Mode().Perm())
	}
	return nil
}
