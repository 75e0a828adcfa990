package index

import (
	"context"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/query"
)

// Event decodes the hit's stored event (event.DecodeStored), with its Seq
// set to the hit's.
func (h *Hit) Event() (*event.Event, error) {
	e, err := event.DecodeStored(h.Raw)
	if err != nil {
		return nil, err
	}
	e.Seq = h.Seq
	return e, nil
}

// EachEvent calls fn, in time order (then seq), with every event that
// matches f, decoded by Hit.Event: the one way the readers of a session
// (timeline, the package view, run's summary) get its events. An entry
// that does not decode is passed over, as the index passed it over when
// it was added. An error from fn stops the iteration and is returned as is.
func (r *Reader) EachEvent(ctx context.Context, f query.Filter, fn func(*event.Event) error) error {
	return r.Each(ctx, f, func(h Hit) error {
		e, err := h.Event()
		if err != nil {
			return nil
		}
		return fn(e)
	})
}

// NewestKernel returns the payload of the newest collector.capabilities
// journaled before seq before (what the kernel collector of the host could
// see and enforce), or nil when the index has none.
func (r *Reader) NewestKernel(ctx context.Context, before uint64) (*event.Kernel, error) {
	var k *event.Kernel
	var newest uint64
	err := r.EachEvent(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindCapabilities}}}, func(e *event.Event) error {
		if e.Seq >= before || (k != nil && e.Seq < newest) || e.Kernel == nil {
			return nil
		}
		k, newest = e.Kernel, e.Seq
		return nil
	})
	return k, err
}

// NewestSession returns the id of the session that began last among those
// with an event matching f, or "" when there is none.
func (r *Reader) NewestSession(ctx context.Context, f query.Filter) (string, error) {
	ss, err := r.Sessions(ctx, f)
	if err != nil || len(ss) == 0 {
		return "", err
	}
	return ss[len(ss)-1].ID, nil
}
