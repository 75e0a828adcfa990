package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandtrail/sandtrail/record/index"
)

// Retainer is the optional ability of a Daemon to apply the retention
// policy to its journal and index, and to place and lift legal holds
// (OpRetention, OpHold, OpRelease, OpHolds). uid is the caller's, from the
// control socket's peer credentials: the daemon records it with what it
// does.
type Retainer interface {
	ApplyRetention(ctx context.Context, dryRun bool, uid uint32) (*RetentionReport, error)
	Hold(ctx context.Context, session, reason string, uid uint32) (*index.Hold, error)
	Release(ctx context.Context, session, reason string, uid uint32) error
	Holds(ctx context.Context) ([]index.Hold, error)
}

// errNoRetention is the reply of a daemon that keeps no index.
var errNoRetention = errors.New("this daemon applies no retention policy (it keeps no index)")

// retention serves OpRetention.
func (c *Server) retention(k *call) {
	r, ok := c.d.(Retainer)
	if !ok {
		k.fail(fmt.Errorf("retention: %w", errNoRetention))
		return
	}
	rep, err := r.ApplyRetention(c.ctx, k.req.DryRun, k.uid)
	if err != nil {
		k.fail(fmt.Errorf("retention: %w", err))
		return
	}
	k.reply(Response{OK: true, Retention: rep})
}

// hold serves OpHold and OpRelease, for the caller's uid.
func (c *Server) hold(k *call) {
	r, ok := c.d.(Retainer)
	if !ok {
		k.fail(fmt.Errorf("%s: %w", k.req.Op, errNoRetention))
		return
	}
	if k.req.Op == OpRelease {
		if err := r.Release(c.ctx, k.req.Session, k.req.Reason, k.uid); err != nil {
			k.fail(fmt.Errorf("release: %w", err))
			return
		}
		k.reply(Response{OK: true})
		return
	}
	h, err := r.Hold(c.ctx, k.req.Session, k.req.Reason, k.uid)
	if err != nil {
		k.fail(fmt.Errorf("hold: %w", err))
		return
	}
	k.reply(Response{OK: true, Holds: []index.Hold{*h}})
}

// holds serves OpHolds.
func (c *Server) holds(k *call) {
	r, ok := c.d.(Retainer)
	if !ok {
		k.fail(fmt.Errorf("holds: %w", errNoRetention))
		return
	}
	hs, err := r.Holds(c.ctx)
	if err != nil {
		k.fail(fmt.Errorf("holds: %w", err))
		return
	}
	if hs == nil {
		hs = []index.Hold{}
	}
	k.reply(Response{OK: true, Holds: hs})
}
