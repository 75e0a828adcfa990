package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandtrail/sandtrail/record/event"
)

// Investigator is the optional ability of a Daemon to journal that an
// investigator is about to reveal sealed tool I/O (OpUnseal), on behalf of
// uid, the control socket peer's: the record says who opened what, and
// why, before anything is shown.
type Investigator interface {
	RecordUnseal(ctx context.Context, inv *event.Investigate, uid uint32) (seq uint64, err error)
}

// unseal serves OpUnseal.
func (c *Server) unseal(k *call) {
	r, ok := c.d.(Investigator)
	if !ok {
		k.fail(errors.New("unseal: this daemon cannot journal an unseal"))
		return
	}
	if k.req.Unseal == nil {
		k.fail(errors.New("unseal: the request names nothing to unseal"))
		return
	}
	seq, err := r.RecordUnseal(c.ctx, k.req.Unseal, k.uid)
	if err != nil {
		k.fail(fmt.Errorf("unseal: %w", err))
		return
	}
	k.reply(Response{OK: true, Seq: seq})
}
