package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
)

// failure returns the sticky write error, if any.
func (j *Journal) failure() error {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// fail makes err the sticky write error (keeping the first) and returns it.
func (j *Journal) fail(err error) error {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	if j.err == nil {
		j.err = fmt.Errorf("writing journal (reopen it to recover): %w", err)
		j.log.Error("journal write failed", "error", err)
	}
	return j.err
}

// run is the writer goroutine: it gathers the waiting appends into one
// batch, writes it and hands it to the syncer.
func (j *Journal) run() {
	defer close(j.written)
	batch := make([]*request, 0, 64)
	for {
		select {
		case r := <-j.reqs:
			batch = append(batch[:0], r)
			n := r.size
		drain:
			for n < maxBatchBytes {
				select {
				case r := <-j.reqs:
					batch = append(batch, r)
					n += r.size
				default:
					break drain
				}
			}
			j.write(batch)
			clear(batch)
		case do := <-j.ctl:
			do()
		case <-j.closing:
			for {
				select {
				case r := <-j.reqs:
					j.write([]*request{r})
				default:
					return
				}
			}
		}
	}
}

// write frames, hashes and writes one batch, then queues it for the syncer.
func (j *Journal) write(batch []*request) {
	failAll := func(err error) {
		for _, r := range batch {
			r.done <- err
		}
	}
	if err := j.failure(); err != nil {
		failAll(err)
		return
	}
	start := j.wsize
	if j.segSize >= j.segMax && start > j.segFirst {
		if err := j.rotate(start); err != nil {
			failAll(j.fail(err))
			return
		}
	}
	seq := start
	terminate := false
	j.buf = j.buf[:0]
	j.hbuf = j.hbuf[:0]
	j.hbytes = j.hbytes[:0]
	for _, r := range batch {
		for i, rest := range r.rest {
			at := len(j.buf)
			j.buf = append(j.buf, make([]byte, frameHeaderSize)...)
			j.buf = append(j.buf, seqPrefix...)
			j.buf = strconv.AppendUint(j.buf, seq, 10)
			j.buf = append(j.buf, rest...)
			payload := j.buf[at+frameHeaderSize:]
			putFrameHeader(j.buf[at:at+frameHeaderSize], payload)
			j.hbuf = j.edge.append(j.x, j.x.leaf(payload), j.hbuf)
			if r.evs[i].Kind == event.KindSessionTerminate {
				terminate = true
			}
			r.evs[i].Seq = seq
			seq++
		}
	}
	for _, h := range j.hbuf {
		j.hbytes = append(j.hbytes, h[:]...)
	}
	if _, err := j.seg.Write(j.buf); err != nil {
		failAll(j.fail(err))
		return
	}
	if _, err := j.hashes.WriteAt(j.hbytes, j.hcount*tlog.HashSize); err != nil {
		failAll(j.fail(err))
		return
	}
	j.segSize += int64(len(j.buf))
	j.hcount += int64(len(j.hbuf))
	j.wsize = seq
	j.inflight.Add(1)
	j.written <- &flight{reqs: append([]*request(nil), batch...), seg: j.seg, end: seq, root: j.edge.root(j.x), terminate: terminate}
}

// rotate waits until every written batch is durable, closes the current
// segment and starts one at first.
func (j *Journal) rotate(first uint64) error {
	j.inflight.Wait()
	if err := j.failure(); err != nil {
		return err
	}
	if err := j.seg.Sync(); err != nil {
		return fmt.Errorf("syncing segment: %w", err)
	}
	if err := j.seg.Close(); err != nil {
		return fmt.Errorf("closing segment: %w", err)
	}
	p := filepath.Join(j.dir, segmentName(first))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		j.seg = nil
		return fmt.Errorf("creating segment: %w", err)
	}
	j.seg, j.segFirst, j.segSize = f, first, 0
	if err := atomicfile.SyncDir(j.dir); err != nil {
		return fmt.Errorf("creating segment: %w", err)
	}
	j.log.Debug("rotated segment", "segment", filepath.Base(p))
	return nil
}

// syncer makes written batches durable, acknowledges them, and signs
// checkpoints: every j.every entries, at a session.terminate, and every
// j.interval while entries arrive.
func (j *Journal) syncer() {
	defer close(j.done)
	tick := time.NewTicker(j.interval)
	defer tick.Stop()
	group := make([]*flight, 0, flightsQueued+1)
	for {
		select {
		case f, ok := <-j.written:
			if !ok {
				return
			}
			group = append(group[:0], f)
		drain:
			for {
				select {
				case f, ok := <-j.written:
					if !ok {
						break drain
					}
					group = append(group, f)
				default:
					break drain
				}
			}
			j.sync(group)
			clear(group)
		case <-tick.C:
			j.cpMu.Lock()
			if j.last == nil && j.durable.N > 0 || j.last != nil && uint64(j.durable.N) > j.last.Size {
				if _, err := j.checkpointLocked(); err != nil {
					j.log.Error("signing checkpoint failed", "error", err)
				}
			}
			j.cpMu.Unlock()
		}
	}
}

// sync makes a group of written batches durable with one fdatasync and
// acknowledges them. All of a group is in one segment: rotate waits for the
// batches of the old segment first.
func (j *Journal) sync(group []*flight) {
	defer j.inflight.Add(-len(group))
	last := group[len(group)-1]
	err := j.failure()
	if err == nil {
		if serr := datasync(last.seg); serr != nil {
			// After a failed fsync the kernel may drop the dirty pages and
			// report success next time: never retry, fail closed.
			err = j.fail(serr)
		}
	}
	if err != nil {
		for _, f := range group {
			for _, r := range f.reqs {
				r.done <- err
			}
		}
		return
	}
	j.size.Store(last.end)
	terminate := false
	for _, f := range group {
		terminate = terminate || f.terminate
	}
	j.cpMu.Lock()
	j.durable = tlog.Tree{N: int64(last.end), Hash: last.root}
	if terminate {
		if _, err := j.checkpointLocked(); err != nil {
			j.log.Error("signing checkpoint failed", "error", err)
		}
	}
	due := j.last == nil && last.end >= j.every || j.last != nil && last.end-j.last.Size >= j.every
	j.cpMu.Unlock()
	for _, f := range group {
		for _, r := range f.reqs {
			r.done <- nil
		}
	}
	j.chMu.Lock()
	close(j.changed)
	j.changed = make(chan struct{})
	j.chMu.Unlock()
	if due {
		j.cpMu.Lock()
		if _, err := j.checkpointLocked(); err != nil {
			j.log.Error("signing checkpoint failed", "error", err)
		}
		j.cpMu.Unlock()
	}
}

// checkpointLocked signs and stores a checkpoint of the durable tree, after
// checking that it is consistent with the previous one. It returns the
// previous checkpoint when the tree has not grown. j.cpMu must be held.
func (j *Journal) checkpointLocked() (*Checkpoint, error) {
	if err := j.failure(); err != nil {
		return nil, err
	}
	n, root := uint64(j.durable.N), j.durable.Hash
	if j.last != nil && j.last.Size == n {
		return j.last, nil
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the journal is empty", ErrNotFound)
	}
	if j.last != nil {
		if n < j.last.Size {
			return nil, fmt.Errorf("%w: size %d below checkpoint %d", ErrInconsistent, n, j.last.Size)
		}
		hr := &fileHashes{f: j.hashes, count: tlog.StoredHashCount(int64(n))}
		proof, err := tlog.ProveTree(int64(n), int64(j.last.Size), hr)
		if err != nil {
			return nil, fmt.Errorf("%w: proving tree %d extends %d: %v", ErrInconsistent, n, j.last.Size, err)
		}
		if err := tlog.CheckTree(proof, int64(n), root, int64(j.last.Size), j.last.Root); err != nil {
			return nil, fmt.Errorf("%w: tree %d does not extend checkpoint %d: %v", ErrInconsistent, n, j.last.Size, err)
		}
	}
	if err := j.hashes.Sync(); err != nil {
		return nil, fmt.Errorf("syncing hash file: %w", err)
	}
	cp, err := signCheckpoint(j.signer, j.origin, n, root)
	if err != nil {
		return nil, err
	}
	if err := storeCheckpoint(j.dir, cp); err != nil {
		return nil, err
	}
	j.last = cp
	j.log.Debug("signed checkpoint", "size", n)
	return cp, nil
}

// Size returns the number of durable entries, which is the next seq.
func (j *Journal) Size() uint64 { return j.size.Load() }

// Dir returns the journal directory.
func (j *Journal) Dir() string { return j.dir }

// Changed returns a channel that is closed at the next durable append.
// Followers wait on it, then call Changed again.
func (j *Journal) Changed() <-chan struct{} {
	j.chMu.Lock()
	defer j.chMu.Unlock()
	return j.changed
}

// Checkpoint signs a checkpoint of the durable tree now, if it grew since
// the last one, and returns it (or the last one). It returns an error
// wrapping ErrNotFound for an empty journal and ErrClosed after Close.
func (j *Journal) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.cpMu.Lock()
	defer j.cpMu.Unlock()
	if j.filesClosed {
		return nil, ErrClosed
	}
	return j.checkpointLocked()
}

// Close waits for pending appends, signs a final checkpoint, and closes the
// journal, releasing its lock. It returns the journal's write error, if
// any.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.pruneMu.Lock() // a Prune in progress finishes first
		defer j.pruneMu.Unlock()
		close(j.closing)
		<-j.done
		j.cpMu.Lock()
		defer j.cpMu.Unlock()
		err := j.failure()
		if err == nil && j.durable.N > 0 {
			_, err = j.checkpointLocked()
		}
		j.filesClosed = true
		if cerr := j.closeFiles(); err == nil {
			err = cerr
		}
		j.closeErr = err
	})
	return j.closeErr
}

func (j *Journal) closeFiles() error {
	var errs []error
	if j.seg != nil {
		errs = append(errs, j.seg.Sync(), j.seg.Close())
		j.seg = nil
	}
	if j.hashes != nil {
		errs = append(errs, j.hashes.Sync(), j.hashes.Close())
		j.hashes = nil
	}
	if j.lock != nil {
		errs = append(errs, j.lock.Close())
		j.lock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing journal: %w", err)
	}
	return nil
}
