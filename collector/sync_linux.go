//go:build 386 || amd64 || arm64

package collector

import (
	"context"
	"time"
)

// ringbufHeaderSize is the kernel's header before each ring-buffer record
// (BPF_RINGBUF_HDR_SZ); records are padded to 8 bytes.
const ringbufHeaderSize = 8

// syncPoll is how often the reader looks at the hasher while a Sync
// waits (it looks every poll interval otherwise).
const syncPoll = time.Millisecond

// syncWait is one Sync waiting for the reader goroutine.
type syncWait struct {
	// target is the ring buffer's bytes read once every record written
	// before the Sync is read; reached is set then, and held is the
	// number of events that had waited behind an exec's hash by then.
	target  uint64
	reached bool
	held    uint64
	done    chan uint64 // the events sent on Events, when they are out
}

// Sync waits until the events of every record that the kernel had written
// to the ring buffer when it was called are sent on Events, and returns how
// many events the collector has sent on Events so far, those among them: a
// consumer that has taken that many from Events has them all. Events held
// behind an exec whose file is being hashed wait for it, at most hashWait.
// Merged repeats of a file operation (WithMergeWindow) held so far are
// sent too, their merge ended early (a later repeat starts a new one), so
// that a session's last file events are in before its end is checkpointed.
// After Close it returns at once.
// It returns ctx's error when ctx is done first.
//
// A session's processes write their records before the session's cgroup
// can be removed, so that Sync after the session's cleanup waits for the
// last of them, and no longer.
func (c *Collector) Sync(ctx context.Context) (uint64, error) {
	w := &syncWait{done: make(chan uint64, 1)}
	select {
	case c.syncs <- w:
	case <-c.done:
		return c.sent.Load(), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// Wake the reader from its wait for records; it tells a Sync's flush
	// from Close's by closeFlushed.
	_ = c.rd.Flush()
	select {
	case n := <-w.done:
		return n, nil
	case <-c.done:
		return c.sent.Load(), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// takeSyncs takes the Syncs that arrived, each waiting for the records in
// the ring buffer now. It runs on the reader goroutine.
func (c *Collector) takeSyncs() {
	for {
		select {
		case w := <-c.syncs:
			w.target = c.readBytes + uint64(c.rd.AvailableBytes())
			c.waiting = append(c.waiting, w)
		default:
			return
		}
	}
}

// settleSyncs answers the Syncs whose records are read and whose events
// are out of the held queue, handing the batch over first. It runs on the
// reader goroutine.
func (c *Collector) settleSyncs() {
	n := 0
	for _, w := range c.waiting {
		// An empty ring buffer after the Sync was taken has been read past
		// its records too (and a discarded record, which the reader skips
		// unseen, cannot keep a Sync waiting).
		if !w.reached && (c.readBytes >= w.target || c.rd.AvailableBytes() == 0) {
			w.reached, w.held = true, c.heldIn
		}
		if !w.reached || c.heldOut < w.held {
			c.waiting[n] = w
			n++
			continue
		}
		// The merged repeats held so far end their merge now: a session's
		// last file events are not left to its merge window.
		c.file.flush(c, time.Time{})
		c.flushBatch()
		w.done <- c.sent.Load()
	}
	clear(c.waiting[n:])
	c.waiting = c.waiting[:n]
}

// read counts a record read from the ring buffer, for the Syncs.
func (c *Collector) read(raw []byte) {
	c.readBytes += ringbufHeaderSize + uint64(len(raw)+7)&^7
}

// pollDeadline is how long the reader waits for records from now: the
// poll interval, or syncPoll while a Sync waits on the hasher.
func (c *Collector) pollDeadline(now time.Time) time.Time {
	if len(c.waiting) > 0 {
		return now.Add(syncPoll)
	}
	return now.Add(c.opts.poll)
}
