package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/record/event"
)

// run runs a session for a `sandtrail run` client with the client's
// descriptors as its stdio: the first reply names the session, the last
// one says how it ended. The session ends with reason signal when the
// client goes away first.
func (c *Server) run(k *call) {
	if len(k.files) != 3 {
		k.fail(fmt.Errorf("run: want stdin, stdout and stderr descriptors, got %d", len(k.files)))
		return
	}
	if k.req.Spec == nil {
		k.fail(errors.New("run: no spec"))
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go func() {
		// The client sends nothing more; EOF means it is gone.
		_, _ = io.Copy(io.Discard, k.rest)
		cancel()
	}()
	var cs *ctlSession
	stopAlerts := func() {}
	t0 := time.Now()
	res, err := launch.Run(ctx, c.d, k.req.Spec, [3]*os.File(k.files), func(id string) {
		s, _ := c.d.Session(id)
		cs = &ctlSession{s: s, created: time.Now(), started: time.Now(), argv: k.req.Spec.Argv}
		c.mu.Lock()
		c.sessions[id] = cs
		c.mu.Unlock()
		c.replySession(k, cs)
		stopAlerts = forwardAlerts(k, c.d, id)
	})
	if cs != nil {
		c.markCleaned(cs)
	}
	ran := time.Now()
	if err == nil {
		// The client reads its session back and verifies the journal.
		err = c.d.Sync(c.ctx)
	}
	c.log.Debug("run session ended", "session_id", sessionID(res), "run", ran.Sub(t0), "sync", time.Since(ran))
	// After Sync: the alerts of the session's last events are raised.
	stopAlerts()
	if err != nil && res == nil {
		k.fail(err)
		return
	}
	r := Response{OK: err == nil, Result: res}
	if err != nil {
		r.Error = err.Error()
	}
	k.reply(r)
}

// maxAlertBacklog bounds the alerts waiting for a slow run client; more
// are not sent to it (they are journaled all the same).
const maxAlertBacklog = 256

// forwardAlerts sends the session's alerts to the run client as they are
// raised, without ever blocking the rules: past maxAlertBacklog waiting,
// an alert is not sent. The returned stop ends it once the backlog is
// sent.
func forwardAlerts(k *call, d Daemon, id string) (stop func()) {
	ch := make(chan *event.Event, maxAlertBacklog)
	cancel := d.WatchAlerts(id, func(e *event.Event) {
		select {
		case ch <- e:
		default:
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			k.reply(Response{OK: true, Alert: e})
		}
	}()
	return func() {
		cancel()
		close(ch)
		<-done
	}
}

// sessionID is the id of res's session, "" without one.
func sessionID(res *launch.Result) string {
	if res == nil {
		return ""
	}
	return res.SessionID
}
