package control

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/record/sink"
)

// hostOps are the ops that name no existing session; each replies itself.
var hostOps = map[string]func(c *Server, k *call){
	OpRun:       (*Server).run,
	OpList:      (*Server).list,
	OpCreate:    (*Server).create,
	OpAlerts:    (*Server).alerts,
	OpStatus:    (*Server).status,
	OpRetention: (*Server).retention,
	OpHold:      (*Server).hold,
	OpRelease:   (*Server).hold,
	OpHolds:     (*Server).holds,
	OpUnseal:    (*Server).unseal,
}

// SinkReporter is the optional ability of a Daemon to report its sinks.
type SinkReporter interface {
	Sinks() []sink.Status
}

// status replies with the daemon's sinks.
func (c *Server) status(k *call) {
	r := Response{OK: true}
	if sr, ok := c.d.(SinkReporter); ok {
		r.Sinks = sr.Sinks()
	}
	k.reply(r)
}

// sessionOps are the ops on one of the server's sessions; the server
// replies with the session's info when one returns nil.
var sessionOps = map[string]func(c *Server, k *call, cs *ctlSession) error{
	OpShow:    func(*Server, *call, *ctlSession) error { return nil },
	OpStart:   (*Server).start,
	OpPause:   (*Server).pause,
	OpResume:  (*Server).resume,
	OpStop:    (*Server).stop,
	OpCleanup: (*Server).cleanup,
}

// ctlSession is a session the server knows.
type ctlSession struct {
	s       *session.Session
	created time.Time
	started time.Time
	argv    []string
	paused  bool
	cleaned bool
}

func (cs *ctlSession) info() SessionInfo {
	sp := cs.s.Spec()
	in := SessionInfo{ID: sp.ID, User: sp.User, Tenant: sp.Tenant, Template: sp.Template, Image: sp.Image,
		Limits: sp.Limits, CgroupID: cs.s.CgroupID(), CgroupPath: cs.s.CgroupPath(), Workdir: cs.s.Workdir(),
		Dir: filepath.Dir(cs.s.Workdir()), Argv: cs.argv, Created: cs.created, Started: cs.started}
	select {
	case <-cs.s.Done():
		in.Reason, in.ExitStatus = cs.s.Result()
		in.State = "terminated"
		if cs.cleaned {
			in.State, in.CgroupPath = "cleaned", ""
		}
	default:
		switch {
		case cs.paused:
			in.State = "paused"
		case !cs.started.IsZero():
			in.State = "running"
		default:
			in.State = "created"
		}
	}
	return in
}

func (c *Server) list(k *call) {
	c.mu.Lock()
	var out []SessionInfo
	for _, cs := range c.sessions {
		out = append(out, cs.info())
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	k.reply(Response{OK: true, Sessions: out})
}

func (c *Server) create(k *call) {
	spec := k.req.Spec
	if spec == nil {
		k.fail(errors.New("create: no spec"))
		return
	}
	acct, err := launch.LookupAccount(spec.User)
	if err != nil {
		k.fail(err)
		return
	}
	s, err := c.d.CreateSession(c.ctx, session.Spec{ID: spec.ID, Tenant: spec.Tenant, User: acct.Name,
		Template: spec.Template, Image: spec.Image, Limits: spec.Limits, Agent: launch.AgentSpec(spec.User, acct)})
	if err != nil {
		k.fail(err)
		return
	}
	cs := &ctlSession{s: s, created: time.Now()}
	c.mu.Lock()
	c.sessions[s.ID()] = cs
	c.mu.Unlock()
	c.replySession(k, cs)
}

func (c *Server) pause(k *call, cs *ctlSession) error {
	reason := k.req.Reason
	if reason == "" {
		reason = session.PauseAPI
	}
	if reason != session.PauseAPI && reason != session.PauseTimeout && reason != session.PauseAuto {
		return fmt.Errorf("pause: reason %q: want api, timeout or auto", reason)
	}
	if err := cs.s.Pause(c.ctx, reason, k.actor); err != nil {
		return err
	}
	c.setPaused(cs, true)
	return nil
}

func (c *Server) resume(k *call, cs *ctlSession) error {
	if err := cs.s.Resume(c.ctx, k.actor); err != nil {
		return err
	}
	c.setPaused(cs, false)
	return nil
}

func (c *Server) stop(k *call, cs *ctlSession) error {
	reason := k.req.Reason
	if reason == "" {
		reason = session.ReasonAPI
	}
	return cs.s.Terminate(c.ctx, reason, nil)
}

func (c *Server) cleanup(k *call, cs *ctlSession) error {
	keep, err := launch.CheckKeep(k.req.Keep)
	if err != nil {
		return err
	}
	if err := c.d.CleanupSession(c.ctx, cs.s, keep); err != nil {
		return err
	}
	c.markCleaned(cs)
	return nil
}

// keepCleaned is how many cleaned-up sessions list and show still know.
const keepCleaned = 256

// markCleaned records that cs was cleaned up, and forgets the oldest
// cleaned-up sessions beyond keepCleaned (the record keeps them all).
func (c *Server) markCleaned(cs *ctlSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs.cleaned = true
	var cleaned []*ctlSession
	for _, x := range c.sessions {
		if x.cleaned {
			cleaned = append(cleaned, x)
		}
	}
	if len(cleaned) <= keepCleaned {
		return
	}
	sort.Slice(cleaned, func(i, j int) bool { return cleaned[i].created.Before(cleaned[j].created) })
	for _, x := range cleaned[:len(cleaned)-keepCleaned] {
		delete(c.sessions, x.s.ID())
	}
}

func (c *Server) setPaused(cs *ctlSession, p bool) {
	c.mu.Lock()
	cs.paused = p
	c.mu.Unlock()
}

// start runs a command in a created session, detached: stdin is
// /dev/null, stdout and stderr go to stdout.log and stderr.log in the
// session's directory. Without a user it runs as the session's, under the
// session's own uid when it has one; a user named runs as exactly that
// account.
func (c *Server) start(k *call, cs *ctlSession) error {
	spec := k.req.Spec
	if spec == nil || len(spec.Argv) == 0 {
		return errors.New("start: no command given")
	}
	named := spec.User != ""
	if !named {
		spec.User = cs.s.Spec().User
	}
	acct, err := launch.LookupAccount(spec.User)
	if err != nil {
		return err
	}
	if !named {
		acct = launch.SessionAccount(cs.s, acct)
	}
	files, err := logFiles(filepath.Dir(cs.s.Workdir()))
	if err != nil {
		return err
	}
	withEnv := *spec
	withEnv.Set = launch.MergeEnv(c.d.SessionEnv(), spec.Set)
	cmd, err := launch.Command(cs.s, &withEnv, acct, files)
	if err == nil {
		err = cs.s.Start(c.ctx, cmd)
	}
	if err != nil {
		closeFiles(files[:])
		return err
	}
	c.mu.Lock()
	cs.started, cs.argv = time.Now(), spec.Argv
	c.mu.Unlock()
	go func() {
		<-cs.s.Done()
		closeFiles(files[:])
	}()
	return nil
}

// logFiles opens a detached command's stdio: /dev/null, and stdout.log
// and stderr.log in dir.
func logFiles(dir string) ([3]*os.File, error) {
	var files [3]*os.File
	var err error
	if files[0], err = os.Open(os.DevNull); err != nil {
		return files, err
	}
	for i, name := range []string{"stdout.log", "stderr.log"} {
		if files[i+1], err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600); err != nil {
			closeFiles(files[:])
			return files, fmt.Errorf("opening session log: %w", err)
		}
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
