package main

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

// agentUser is the unprivileged user that session commands run as unless
// told otherwise; install.sh creates it.
const agentUser = "sandtrail-agent"

// errNoAgentUser is returned when the default agent user does not exist.
var errNoAgentUser = errors.New("the user " + agentUser + " does not exist: run install.sh, which creates it, or pass --user")

// sessionRequest describes a session to create and, for run and start, the
// command to run in it. It is the body of the control protocol's create,
// start and run requests, and what `sandtrail run` hosts itself.
type sessionRequest struct {
	ID       string       `json:"id,omitempty"`
	Tenant   string       `json:"tenant,omitempty"`
	Template string       `json:"template,omitempty"`
	Image    string       `json:"image,omitempty"`
	Limits   event.Limits `json:"limits"`
	// User is the account the command runs as; empty means agentUser.
	User string `json:"user,omitempty"`
	// Argv and Env are the command and its environment (HOME, USER,
	// LOGNAME and PWD are replaced).
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Keep is the workdir's fate at cleanup: preserved, deleted or
	// snapshot.
	Keep string `json:"keep,omitempty"`
}

// runResult is how a session run by runInSession ended.
type runResult struct {
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

// account is a resolved user to run a command as.
type account struct {
	Name     string
	UID, GID uint32
}

// lookupAccount resolves name (a user name or a numeric uid), or the agent
// user when name is empty.
func lookupAccount(name string) (account, error) {
	def := name == ""
	if def {
		name = agentUser
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
			return account{}, errNoAgentUser
		}
		return account{}, fmt.Errorf("looking up user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return account{}, fmt.Errorf("user %q has a non-numeric uid or gid", name)
	}
	return account{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}, nil
}

// checkKeep validates a --keep value.
func checkKeep(keep string) (string, error) {
	switch keep {
	case "":
		return session.FSPreserved, nil
	case session.FSPreserved, session.FSDeleted, session.FSSnapshot:
		return keep, nil
	}
	return "", fmt.Errorf("--keep %q: want preserved, deleted or snapshot", keep)
}

// prepareCommand builds the session's main process: argv as acct, in the
// workdir with HOME there, with stdio passed through.
func prepareCommand(s *session.Session, req *sessionRequest, acct account, stdio [3]*os.File) (*exec.Cmd, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("no command given")
	}
	wd := s.Workdir()
	if err := os.Chown(wd, int(acct.UID), int(acct.GID)); err != nil {
		return nil, fmt.Errorf("handing the workdir to %s: %w", acct.Name, err)
	}
	if err := reachable(wd, acct); err != nil {
		return nil, err
	}
	env := commandEnv(req.Env, wd, acct, s.ID())
	path, err := lookPath(req.Argv[0], env)
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

// commandEnv is env with the session's HOME, USER, LOGNAME, PWD and
// SANDTRAIL_SESSION_ID, without the invoking user's SSH agent, runtime
// directory, session bus and sudo variables.
func commandEnv(env []string, wd string, acct account, id string) []string {
	// Besides what is replaced, drop what would point the agent at the
	// invoking user's own agents and buses.
	drop := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "PWD": true, "SANDTRAIL_SESSION_ID": true,
		"SUDO_USER": true, "SUDO_UID": true, "SUDO_GID": true, "SUDO_COMMAND": true,
		"SSH_AUTH_SOCK": true, "XDG_RUNTIME_DIR": true, "DBUS_SESSION_BUS_ADDRESS": true, "MAIL": true, "OLDPWD": true}
	out := make([]string, 0, len(env)+5)
	hasPath := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] {
			continue
		}
		hasPath = hasPath || k == "PATH"
		out = append(out, kv)
	}
	if !hasPath {
		out = append(out, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return append(out, "HOME="+wd, "USER="+acct.Name, "LOGNAME="+acct.Name, "PWD="+wd, "SANDTRAIL_SESSION_ID="+id)
}

// lookPath resolves name against the PATH in env, as the shell would.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// openDataDir lets session users reach their workdirs: it adds search
// permission for others (x, never r) to the data directory and the
// sessions directory, where an older install made them 0750. What lies in
// the data directory stays private by its own modes (journal/ and keys/
// are 0700, the index is created 0600).
func openDataDir(cfg *Config) error {
	for _, d := range []string{cfg.DataDir, sessionsDir(cfg)} {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking the data directory: %w", err)
		}
		if m := fi.Mode().Perm(); m&0o001 == 0 {
			if err := os.Chmod(d, m|0o001); err != nil {
				return fmt.Errorf("making %s searchable: %w", d, err)
			}
		}
	}
	return nil
}

// reachable checks that acct may search every directory from / down to
// dir, so that the command can start in its workdir.
func reachable(dir string, acct account) error {
	if acct.UID == 0 {
		return nil
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("checking the workdir: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok {
			perm := fi.Mode().Perm()
			var bit fs.FileMode = 0o001
			switch {
			case st.Uid == acct.UID:
				bit = 0o100
			case st.Gid == acct.GID:
				bit = 0o010
			}
			if perm&bit == 0 {
				return fmt.Errorf("user %s cannot reach its workdir %s: %s is mode %v; make it searchable (chmod o+x) or choose another data_dir", acct.Name, dir, p, perm)
			}
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

// exitStatusOf maps a failure to start a command to a shell-like status:
// 127 when it was not found, 126 otherwise.
func exitStatusOf(err error) int32 {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// runInSession creates a session for req, runs its command with stdio as
// acct, waits for the session to end (terminating it with reason signal
// when ctx is done first), cleans it up and returns how it ended. started,
// when not nil, is called once the session exists.
func (h *host) runInSession(ctx context.Context, req *sessionRequest, stdio [3]*os.File, started func(id string)) (*runResult, error) {
	keep, err := checkKeep(req.Keep)
	if err != nil {
		return nil, err
	}
	acct, err := lookupAccount(req.User)
	if err != nil {
		return nil, err
	}
	res := &runResult{From: h.j.Size(), Keep: keep}
	s, err := h.createSession(ctx, session.Spec{ID: req.ID, Tenant: req.Tenant, User: acct.Name,
		Template: req.Template, Image: req.Image, Limits: req.Limits})
	if err != nil {
		return nil, err
	}
	res.SessionID, res.Workdir = s.ID(), s.Workdir()
	if started != nil {
		started(s.ID())
	}
	// The session's own context: Terminate and Cleanup must finish even
	// when ctx is cancelled.
	bg := context.WithoutCancel(ctx)
	res.Started = time.Now()
	cmd, err := prepareCommand(s, req, acct, stdio)
	if err == nil {
		err = s.Start(ctx, cmd)
	}
	if err != nil {
		res.StartErr = err.Error()
		reason := session.ReasonNormal
		if ctx.Err() != nil {
			reason = session.ReasonSignal
		}
		_ = s.Terminate(bg, reason, event.I32(exitStatusOf(err)))
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		_ = s.Terminate(bg, session.ReasonSignal, nil)
		<-s.Done()
	}
	res.Ended = time.Now()
	res.Reason, res.ExitStatus = s.Result()
	if err := h.cleanupSession(bg, s, keep); err != nil {
		return res, err
	}
	return res, nil
}
