package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandtrail/sandtrail/record/event"
)

// Raiser is the optional ability of a Daemon to journal alerts that root
// raised outside it (OpAlerts): it journals them in order, durably, before
// it returns.
type Raiser interface {
	Raise(ctx context.Context, alerts []*event.Event) error
}

// maxAlerts bounds the alerts of one request.
const maxAlerts = 10000

// alerts serves OpAlerts: every event must be a valid alert of a session,
// from the rules; the request is refused whole otherwise.
func (c *Server) alerts(k *call) {
	r, ok := c.d.(Raiser)
	if !ok {
		k.fail(errors.New("alerts: this daemon does not journal alerts raised outside it"))
		return
	}
	evs := k.req.Events
	if len(evs) == 0 || len(evs) > maxAlerts {
		k.fail(fmt.Errorf("alerts: %d events, want 1 to %d", len(evs), maxAlerts))
		return
	}
	for i, e := range evs {
		if err := checkAlert(e); err != nil {
			k.fail(fmt.Errorf("alerts: event %d: %w", i, err))
			return
		}
	}
	if err := r.Raise(c.ctx, evs); err != nil {
		k.fail(fmt.Errorf("alerts: %w", err))
		return
	}
	k.reply(Response{OK: true})
}

// checkAlert accepts an alert event of a session, source rules, that
// validates; its seq is the journal's to give.
func checkAlert(e *event.Event) error {
	switch {
	case e == nil:
		return errors.New("null")
	case e.Kind != event.KindAlert || e.Source != event.SourceRules:
		return fmt.Errorf("kind %q from source %q, want an alert from the rules", e.Kind, e.Source)
	case e.SessionID == "":
		return errors.New("names no session")
	}
	e.Seq = 0
	return e.Validate()
}
