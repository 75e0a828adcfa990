// Package launch starts a session's command: it resolves the account the
// command runs as, builds its environment, resolves the command against
// that environment's PATH, checks that the account can reach its workdir,
// and runs it in a session from its first instruction (Run). `sandtrail
// run`, the daemon's control socket and `sandtrail session start` all
// launch through it.
//
// Trust model: the caller is root; the command runs as an unprivileged
// account with no supplementary groups, in the session's cgroups, with the
// invoking user's agents, buses and sudo variables removed from its
// environment. The default account, AgentUser, runs under a uid of the
// session's own (session.Spec.Agent), so that no two sessions share a uid;
// an account named with --user is that account's uid, which other
// sessions run as the same user share.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/record/event"
)

// AgentUser is the unprivileged user that session commands run as unless
// told otherwise; install.sh creates it.
const AgentUser = "sandtrail-agent"

// ErrNoAgentUser is returned when the default agent user does not exist.
var ErrNoAgentUser = errors.New("the user " + AgentUser + " does not exist: run install.sh, which creates it, or pass --user")

// Request describes a session to create and, for run and start, the
// command to run in it. It is the body of the control protocol's create,
// start and run requests, and what `sandtrail run` hosts itself.
type Request struct {
	ID       string       `json:"id,omitempty"`
	Tenant   string       `json:"tenant,omitempty"`
	Template string       `json:"template,omitempty"`
	Image    string       `json:"image,omitempty"`
	Limits   event.Limits `json:"limits"`
	// User is the account the command runs as; empty means AgentUser,
	// under a uid of the session's own (AgentSpec).
	User string `json:"user,omitempty"`
	// Argv is the command. Env is the caller's environment, of which the
	// session gets only the variables of EnvAllowlist; Set are variables
	// set for the session as they are (--env, --env-file).
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Set  []string `json:"set,omitempty"`
	// Keep is the workdir's fate at cleanup: preserved, deleted or
	// snapshot.
	Keep string `json:"keep,omitempty"`
}

// Result is how a session run by Run ended.
type Result struct {
	SessionID  string    `json:"session_id"`
	Reason     string    `json:"reason"`
	ExitStatus *int32    `json:"exit_status,omitempty"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
	Workdir    string    `json:"workdir"`
	Keep       string    `json:"keep"`
	// From is the journal size before the session was created: its events
	// are at this seq or later.
	From uint64 `json:"from"`
	// StartErr is set when the command could not be started.
	StartErr string `json:"start_error,omitempty"`
}

// Account is a resolved user to run a command as.
type Account struct {
	Name     string
	UID, GID uint32
}

// LookupAccount resolves name (a user name or a numeric uid), or the agent
// user when name is empty (ErrNoAgentUser when it does not exist).
func LookupAccount(name string) (Account, error) {
	def := name == ""
	if def {
		name = AgentUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unk user.UnknownUserError
		if errors.As(err, &unk) {
			if _, perr := strconv.ParseUint(name, 10, 32); perr == nil {
				u, err = user.LookupId(name)
			}
		}
	}
	if err != nil {
		if def {
			return Account{}, ErrNoAgentUser
		}
		return Account{}, fmt.Errorf("looking up user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return Account{}, fmt.Errorf("user %q has a non-numeric uid or gid", name)
	}
	return Account{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}, nil
}

// AgentSpec is what a session spec needs for a command that runs as acct
// because the request named no user (user is empty): the agent account
// under a uid of the session's own. It is nil for a named user, who runs
// as exactly that account.
func AgentSpec(user string, acct Account) *session.Agent {
	if user != "" {
		return nil
	}
	return &session.Agent{Name: acct.Name, GID: acct.GID}
}

// SessionAccount is the account a command of session s runs as: acct, with
// the session's own uid when it has one (AgentSpec).
func SessionAccount(s *session.Session, acct Account) Account {
	if uid, ok := s.UID(); ok {
		acct.UID = uid
	}
	return acct
}

// CheckKeep validates a workdir fate (--keep): preserved (also for empty),
// deleted or snapshot.
func CheckKeep(keep string) (string, error) {
	switch keep {
	case "":
		return session.FSPreserved, nil
	case session.FSPreserved, session.FSDeleted, session.FSSnapshot:
		return keep, nil
	}
	return "", fmt.Errorf("--keep %q: want preserved, deleted or snapshot", keep)
}

// Command builds the session's main process: argv as acct, in the workdir
// with HOME there, with stdio passed through. It hands the workdir to acct,
// mode 0700, and fails when acct cannot reach it or the command is not
// found.
func Command(s *session.Session, req *Request, acct Account, stdio [3]*os.File) (*exec.Cmd, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("no command given")
	}
	wd := s.Workdir()
	if err := os.Chown(wd, int(acct.UID), int(acct.GID)); err != nil {
		return nil, fmt.Errorf("handing the workdir to %s: %w", acct.Name, err)
	}
	if err := os.Chmod(wd, 0o700); err != nil {
		return nil, fmt.Errorf("handing the workdir to %s: %w", acct.Name, err)
	}
	if err := Reachable(wd, acct); err != nil {
		return nil, err
	}
	env := Env(req.Env, req.Set, wd, acct, s.ID())
	path, err := LookPath(req.Argv[0], env, acct)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path, Args: req.Argv, Env: env, Dir: wd,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: acct.UID, Gid: acct.GID, Groups: []uint32{}},
		},
	}
	return cmd, nil
}

// ShimDir is where install.sh puts the package-manager shims; a session's
// PATH starts with it.
const ShimDir = "/usr/local/lib/sandtrail/shims"

// SystemPath is the standard system directories of a session's PATH.
const SystemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SessionPath is a session's PATH: the shims, then the standard system
// directories. The caller's PATH is never a session's: it may name
// directories the agent cannot reach (root's pyenv, say). A host whose
// shims live elsewhere sets PATH in its SessionEnv.
const SessionPath = ShimDir + ":" + SystemPath

// envAllowed reports whether a variable of the caller's environment is
// passed to a session: the terminal, the locale and the time zone.
func envAllowed(k string) bool {
	switch k {
	case "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ":
		return true
	}
	return strings.HasPrefix(k, "LC_")
}

// Env builds a session's environment: the allowed variables of the
// caller's env (envAllowed), PATH (SessionPath), then set as it is, then
// the session's HOME, USER, LOGNAME, PWD and SANDTRAIL_SESSION_ID, which
// nothing overrides. A later variable of a name replaces an earlier one.
func Env(env, set []string, wd string, acct Account, id string) []string {
	out := []string{"PATH=" + SessionPath}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && envAllowed(k) {
			out = append(out, kv)
		}
	}
	out = MergeEnv(out, set)
	return MergeEnv(out, []string{"HOME=" + wd, "USER=" + acct.Name, "LOGNAME=" + acct.Name, "PWD=" + wd, "SANDTRAIL_SESSION_ID=" + id})
}

// LookPath resolves name against the PATH in env, as the shell would, but
// with acct's permissions: the first file on the PATH that acct may
// execute, in a directory it may reach. A name with a slash is taken as
// it is, and must be executable by acct. Its error names the path that
// acct cannot run.
func LookPath(name string, env []string, acct Account) (string, error) {
	if strings.Contains(name, "/") {
		if err := runnable(name, acct); err != nil {
			return "", err
		}
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		err := runnable(p, acct)
		if err == nil {
			return p, nil
		}
		if denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("%s: %w (PATH %s)", name, exec.ErrNotFound, path)
}

// runnable checks that acct may execute the file at p: its directory is
// reachable and its mode lets acct execute it.
func runnable(p string, acct Account) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	d, perm, err := unsearchable(filepath.Dir(p), acct)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if d != "" {
		return fmt.Errorf("%s cannot be run by %s: %s is mode %v: %w", p, acct.Name, d, perm, fs.ErrPermission)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&permBits(fi, acct, 0o111) == 0 {
		return fmt.Errorf("%s cannot be run by %s: it is mode %v: %w", p, acct.Name, fi.Mode().Perm(), fs.ErrPermission)
	}
	return nil
}

// Reachable checks that acct may search every directory from / down to
// dir, so that the command can start in its workdir.
func Reachable(dir string, acct Account) error {
	p, perm, err := unsearchable(dir, acct)
	if err != nil {
		return fmt.Errorf("checking the workdir: %w", err)
	}
	if p != "" {
		return fmt.Errorf("user %s cannot reach its workdir %s: %s is mode %v; make it searchable (chmod o+x) or choose another data_dir", acct.Name, dir, p, perm)
	}
	return nil
}

// unsearchable returns the first directory from dir up to / that acct may
// not search, with its mode, or "" when acct may search them all.
func unsearchable(dir string, acct Account) (string, fs.FileMode, error) {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return "", 0, err
		}
		if fi.Mode()&permBits(fi, acct, 0o111) == 0 {
			return p, fi.Mode().Perm(), nil
		}
		if p == "/" || p == "." {
			return "", 0, nil
		}
	}
}

// permBits is the part of mask (0o111 for execute and search) that
// applies to acct for fi: the owner's, the group's or the others' bits.
// For root it is all of mask: root searches any directory and executes a
// file with any execute bit.
func permBits(fi fs.FileInfo, acct Account, mask fs.FileMode) fs.FileMode {
	if acct.UID == 0 {
		return mask
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case ok && st.Uid == acct.UID:
		return mask & 0o700
	case ok && st.Gid == acct.GID:
		return mask & 0o070
	}
	return mask & 0o007
}

// ExitStatus maps a failure to start a command to a shell-like status: 127
// when it was not found, 126 otherwise.
func ExitStatus(err error) int32 {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// Daemon is what Run needs of the daemon that records sessions (the
// machine's daemon, or run's own when none is running).
type Daemon interface {
	// CreateSession creates a session and sets up its recording before
	// anything can run in it.
	CreateSession(ctx context.Context, spec session.Spec) (*session.Session, error)
	// CleanupSession cleans a terminated session up and ends its
	// recording.
	CleanupSession(ctx context.Context, s *session.Session, fsState string) error
	// JournalSize is the journal's size: the seq of the next event.
	JournalSize() uint64
	// SessionEnv is what the daemon adds to every session's environment
	// (the mirror's address, say); the request's own values (--env,
	// --env-file) replace those of the same names.
	SessionEnv() []string
}

// Run creates a session for req on h, runs its command with stdio as the
// request's user, waits for the session to end (terminating it with reason
// signal when ctx is done first), cleans it up and returns how it ended.
// started, when not nil, is called once the session exists. A command that
// cannot start ends the session (its Result says why); Run returns an
// error, with a nil Result, only when there was no session.
func Run(ctx context.Context, h Daemon, req *Request, stdio [3]*os.File, started func(id string)) (*Result, error) {
	keep, err := CheckKeep(req.Keep)
	if err != nil {
		return nil, err
	}
	acct, err := LookupAccount(req.User)
	if err != nil {
		return nil, err
	}
	res := &Result{From: h.JournalSize(), Keep: keep}
	s, err := h.CreateSession(ctx, session.Spec{ID: req.ID, Tenant: req.Tenant, User: acct.Name,
		Template: req.Template, Image: req.Image, Limits: req.Limits, Agent: AgentSpec(req.User, acct)})
	if err != nil {
		return nil, err
	}
	acct = SessionAccount(s, acct)
	res.SessionID, res.Workdir = s.ID(), s.Workdir()
	if started != nil {
		started(s.ID())
	}
	// The session's own context: Terminate and Cleanup must finish even
	// when ctx is cancelled.
	bg := context.WithoutCancel(ctx)
	res.Started = time.Now()
	withEnv := *req
	withEnv.Set = MergeEnv(h.SessionEnv(), req.Set)
	if err := start(ctx, s, &withEnv, acct, stdio); err != nil {
		res.StartErr = err.Error()
		reason := session.ReasonNormal
		if ctx.Err() != nil {
			reason = session.ReasonSignal
		}
		_ = s.Terminate(bg, reason, event.I32(ExitStatus(err)))
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		_ = s.Terminate(bg, session.ReasonSignal, nil)
		<-s.Done()
	}
	res.Ended = time.Now()
	res.Reason, res.ExitStatus = s.Result()
	if err := h.CleanupSession(bg, s, keep); err != nil {
		return res, err
	}
	return res, nil
}

// MergeEnv is env with the variables of add replacing those of the same
// names.
func MergeEnv(env, add []string) []string {
	if len(add) == 0 {
		return env
	}
	names := map[string]bool{}
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// start builds the session's command and starts it.
func start(ctx context.Context, s *session.Session, req *Request, acct Account, stdio [3]*os.File) error {
	cmd, err := Command(s, req, acct, stdio)
	if err != nil {
		return err
	}
	return s.Start(ctx, cmd)
}

// ParseEnv reads KEY=VALUE assignments: one per --env flag, or the lines
// of an --env-file (blank lines and lines starting with # are skipped; the
// value is everything after the first =, as it is). A key must be a shell
// name.
func ParseEnv(lines []string) ([]string, error) {
	var out []string
	for _, l := range lines {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || !envName(k) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%q: want KEY=VALUE with KEY a name of letters, digits and _", event.Clip(l, 80))
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

func envName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
