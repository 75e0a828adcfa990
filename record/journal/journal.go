// Package journal is sandtrail's record of truth: an append-only,
// tamper-evident log of events with signed checkpoints.
//
// A journal directory holds append-only segment files (seg-<first seq>.log)
// of CRC-framed entries, each entry the canonical encoding of one event
// (event.Marshal) and a leaf of an RFC 6962 Merkle tree (hashed with
// golang.org/x/mod/sumdb/tlog). Beside them, the file "hashes" keeps the
// tree's stored hashes so that proofs need not rehash the log, and
// checkpoints/ keeps signed checkpoints: C2SP tlog-checkpoint bodies (origin,
// tree size, root hash) signed as golang.org/x/mod/sumdb/note Ed25519 notes,
// one file per tree size plus a copy named latest.
//
// Trust model. The writer (Open, Append) runs as root and holds the signing
// key; one writer per directory is enforced with flock. An entry is
// acknowledged only once it is durable (fsync), and a checkpoint is signed
// only after checking that it is consistent with the previous one, so the
// journal never signs two inconsistent trees. Verify recomputes the whole
// tree from the entries (never trusting the hash file) and checks every
// stored checkpoint, and any checkpoint the caller holds elsewhere, against
// the caller's verifier keys. It therefore detects any modification,
// deletion, insertion or reordering of an entry that a checkpoint covers,
// any checkpoint not signed by a trusted key, and truncation below a held
// checkpoint. It cannot detect changes to entries appended after the newest
// checkpoint (it reports them as uncovered), nor truncation above the newest
// checkpoint held off-host, nor anything done by someone holding the signing
// key.
//
// Prune replaces entries that a signed checkpoint covers with tombstones,
// frames of their own kind that keep each entry's seq and leaf hash, in
// sealed segments rewritten atomically. Verify folds a tombstone's leaf
// hash into the tree like an entry's, so a tombstone with another hash
// fails against the checkpoints, and one that no checkpoint covers is
// tampering: pruning removes events, never what a checkpoint proves about
// the tree. See docs/journal.md.
package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
)

// Errors returned by the journal. Each is wrapped with detail.
var (
	// ErrCorrupt means the journal's files are damaged or were modified: a
	// bad entry in the middle of a segment, a gap between segments, or
	// entries that do not match a signed checkpoint. Open refuses such a
	// journal; run Verify for the full picture.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrTampered is wrapped by Verify's error when the journal fails
	// verification.
	ErrTampered = errors.New("journal: tampered")
	// ErrNotFound means no such entry or checkpoint exists.
	ErrNotFound = errors.New("journal: not found")
	// ErrBadCheckpoint means a checkpoint note is malformed.
	ErrBadCheckpoint = errors.New("journal: malformed checkpoint")
	// ErrUnknownKey means a checkpoint is signed by a key not among the
	// verifiers.
	ErrUnknownKey = errors.New("journal: checkpoint signed by unknown key")
	// ErrBadSignature means a known key's signature does not verify.
	ErrBadSignature = errors.New("journal: invalid checkpoint signature")
	// ErrBadKey means a key file is malformed or too widely readable.
	ErrBadKey = errors.New("journal: bad key")
	// ErrLocked means another writer holds the journal directory.
	ErrLocked = errors.New("journal: locked by another writer")
	// ErrClosed is returned by Append and Checkpoint after Close.
	ErrClosed = errors.New("journal: closed")
	// ErrInconsistent means a new checkpoint would not be consistent with
	// the previous one; the journal refuses to sign it.
	ErrInconsistent = errors.New("journal: inconsistent with previous checkpoint")
	// ErrNotSupported is returned on platforms without flock.
	ErrNotSupported = errors.New("journal: not supported on this platform")
)

// Defaults of the options.
const (
	DefaultCheckpointEvery    = 4096
	DefaultCheckpointInterval = time.Second
	DefaultSegmentSize        = 64 << 20
)

// maxBatchBytes caps one batch's write, and flightsQueued the written
// batches waiting for the syncer. Only batches not yet synced can be torn by
// a crash, so Open refuses to cut a "torn" tail longer than maxTornBytes:
// that is corruption, not a crash.
const (
	maxBatchBytes = 4 << 20
	flightsQueued = 2
	maxTornBytes  = (flightsQueued + 2) * (maxBatchBytes + MaxPayload + frameHeaderSize)
)

// Option configures Open.
type Option func(*options)

type options struct {
	log      hclog.Logger
	every    int
	interval time.Duration
	host     string
	origin   string
	segSize  int64
}

// WithLogger sets the logger (default: none).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// WithCheckpointEvery signs a checkpoint every n entries (default 4096).
func WithCheckpointEvery(n int) Option { return func(o *options) { o.every = n } }

// WithCheckpointInterval also signs a checkpoint every d while entries
// arrive (default 1s).
func WithCheckpointInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithHost sets the host written into the journal's own journal.* events
// (default: the hostname).
func WithHost(host string) Option { return func(o *options) { o.host = host } }

// WithOrigin sets the checkpoint origin line (default: the signer's name).
// Open refuses a journal whose checkpoints carry another origin.
func WithOrigin(origin string) Option { return func(o *options) { o.origin = origin } }

// WithSegmentSize rotates to a new segment file once the current one holds
// at least size bytes (default 64 MiB).
func WithSegmentSize(size int64) Option { return func(o *options) { o.segSize = size } }

// Journal is an open journal directory with its single writer. All its
// methods are safe for concurrent use.
//
// Appends flow through two goroutines: the writer gathers waiting appends
// into a batch, frames and hashes them and writes them (run); the syncer
// makes the written batches durable with one fdatasync per group,
// acknowledges them and signs checkpoints (syncer). The writer prepares the
// next batch while the syncer waits for the disk.
type Journal struct {
	dir      string
	signer   note.Signer
	origin   string
	host     string
	log      hclog.Logger
	every    uint64
	interval time.Duration
	segMax   int64

	lock    *os.File
	reqs    chan *request
	ctl     chan func() // run in the writer goroutine, between batches (sealThrough)
	pruneMu sync.Mutex  // one Prune at a time; Close waits for it
	closing chan struct{}
	done    chan struct{} // closed when the syncer exits
	written chan *flight
	size    atomic.Uint64 // durable entries

	chMu    sync.Mutex
	changed chan struct{}

	errMu sync.Mutex
	err   error // sticky: after a failed write or sync the journal accepts nothing

	closeOnce sync.Once
	closeErr  error

	// Owned by the writer goroutine (and by recover before it starts).
	seg      *os.File
	segFirst uint64
	segSize  int64
	hashes   *os.File
	hcount   int64  // stored hashes written
	wsize    uint64 // entries written, not necessarily durable yet
	edge     *edge
	x        *hasher
	buf      []byte
	hbuf     []tlog.Hash
	hbytes   []byte
	inflight sync.WaitGroup // batches handed to the syncer and not yet done

	// cpMu guards the checkpoint state.
	cpMu        sync.Mutex
	last        *Checkpoint
	durable     tlog.Tree // durable size and its root
	filesClosed bool
}

// flight is one written batch on its way to the disk.
type flight struct {
	reqs      []*request
	seg       *os.File
	end       uint64    // tree size after the batch
	root      tlog.Hash // tree hash at end
	terminate bool      // the batch holds a session.terminate
}

type request struct {
	evs  []*event.Event
	rest [][]byte // each encoding after its {"v":N,"seq":0 prefix
	size int
	done chan error
}

// seqPrefix is how every canonical encoding with Seq 0 begins. Append
// marshals in the caller's goroutine with Seq 0 and the writer splices in
// the real seq, which yields exactly event.Marshal's bytes for that seq.
var seqPrefix = []byte(`{"v":` + strconv.Itoa(event.SchemaVersion) + `,"seq":`)

// Open opens (creating if needed) the journal in dir, recovering a torn
// tail: an incomplete or garbled last frame of the last segment, left by a
// crash during an unacknowledged write, is cut back to the last complete
// entry and a journal.recovered event records the cut. A bad entry anywhere
// else, entries fewer than the latest checkpoint covers, or entries whose
// tree does not match it make Open fail with an error wrapping ErrCorrupt.
// Another writer holding dir makes it fail with ErrLocked.
func Open(dir string, signer note.Signer, opts ...Option) (*Journal, error) {
	if signer == nil {
		return nil, errors.New("journal: nil signer")
	}
	o := options{every: DefaultCheckpointEvery, interval: DefaultCheckpointInterval, segSize: DefaultSegmentSize}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = hclog.NewNullLogger()
	}
	if o.every <= 0 {
		return nil, fmt.Errorf("journal: checkpoint every %d entries: must be positive", o.every)
	}
	if o.interval <= 0 {
		return nil, fmt.Errorf("journal: checkpoint interval %v: must be positive", o.interval)
	}
	if o.segSize <= 0 {
		return nil, fmt.Errorf("journal: segment size %d: must be positive", o.segSize)
	}
	if o.host == "" {
		o.host, _ = os.Hostname()
	}
	if o.origin == "" {
		o.origin = signer.Name()
	}
	if o.origin == "" || bytes.ContainsAny([]byte(o.origin), "\n") {
		return nil, fmt.Errorf("journal: origin %q: must be one non-empty line", o.origin)
	}
	if err := os.MkdirAll(filepath.Join(dir, cpDir), 0o700); err != nil {
		return nil, fmt.Errorf("creating journal directory: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, err
	}
	j := &Journal{
		dir: dir, signer: signer, origin: o.origin, host: o.host, log: o.log.Named("journal"),
		every: uint64(o.every), interval: o.interval, segMax: o.segSize,
		lock: lock, reqs: make(chan *request), ctl: make(chan func()), closing: make(chan struct{}), done: make(chan struct{}),
		written: make(chan *flight, flightsQueued), changed: make(chan struct{}), x: newHasher(),
	}
	cut, err := j.recover()
	if err != nil {
		j.closeFiles()
		return nil, err
	}
	go j.run()
	go j.syncer()
	if cut != nil {
		j.log.Warn("cut torn tail", "segment", cut.Segment, "offset", cut.Offset, "cut_bytes", cut.CutBytes)
		ev := &event.Event{Kind: event.KindJournalRecovered, Source: event.SourceJournal, Host: j.host, Journal: cut}
		if err := j.Append(context.Background(), ev); err != nil {
			j.Close()
			return nil, fmt.Errorf("recording recovery: %w", err)
		}
	}
	return j, nil
}

// recover brings the directory to a consistent state and loads the writer
// state. It returns what it cut, if anything.
func (j *Journal) recover() (*event.Journal, error) {
	segs, err := j.segments()
	if err != nil {
		return nil, err
	}
	if err := removePruneTemps(j.dir); err != nil {
		return nil, err
	}
	var tombs lastTombstone
	if err := checkSealed(segs, &tombs); err != nil {
		return nil, err
	}
	last := segs[len(segs)-1]
	size, segSize, cut, err := scanTail(last, &tombs)
	if err != nil {
		return nil, err
	}
	// The latest checkpoint we signed bounds what may be cut.
	cp, err := j.latestCovered(size)
	if err != nil {
		return nil, err
	}
	if err := tombs.covered(cp); err != nil {
		return nil, err
	}
	if cut != nil {
		if err := cutTail(last.path, cut.Offset); err != nil {
			return nil, err
		}
	}
	if err := j.loadHashes(size, cp); err != nil {
		return nil, err
	}
	seg, err := os.OpenFile(last.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("opening segment: %w", err)
	}
	j.seg, j.segFirst, j.segSize = seg, last.first, segSize
	j.last = cp
	j.wsize = size
	j.durable = tlog.Tree{N: int64(size), Hash: j.edge.root(j.x)}
	j.size.Store(size)
	return cut, nil
}

// segments lists the segments, creating the first one in an empty
// directory.
func (j *Journal) segments() ([]segment, error) {
	segs, err := listSegments(j.dir)
	if err != nil || len(segs) > 0 {
		return segs, err
	}
	p := filepath.Join(j.dir, segmentName(0))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating segment: %w", err)
	}
	f.Close()
	if err := atomicfile.SyncDir(j.dir); err != nil {
		return nil, fmt.Errorf("creating segment: %w", err)
	}
	return []segment{{first: 0, path: p}}, nil
}

// checkSealed checks the framing of every entry (CRC, seq) of the segments
// before the last, and that they leave no gaps: the first starts at seq 0
// and each next one where the previous ends.
func checkSealed(segs []segment, tombs *lastTombstone) error {
	if segs[0].first != 0 {
		return fmt.Errorf("%w: first segment %s does not start at seq 0", ErrCorrupt, filepath.Base(segs[0].path))
	}
	for i, s := range segs[:len(segs)-1] {
		n, err := checkSegment(s, tombs)
		if err != nil {
			return err
		}
		if next := segs[i+1]; next.first != n {
			return fmt.Errorf("%w: segment %s starts at seq %d, want %d (run sandtrail verify)", ErrCorrupt, filepath.Base(next.path), next.first, n)
		}
	}
	return nil
}

// scanTail checks the framing of every entry of the last segment. It
// returns the number of entries of the journal and the segment's size up to
// the last complete entry, and describes the torn tail that follows it, if
// any. Anything else that is wrong with the framing is ErrCorrupt.
func scanTail(last segment, tombs *lastTombstone) (size uint64, segSize int64, cut *event.Journal, err error) {
	r, err := openSegmentReader(last.path, last.first)
	if err != nil {
		return 0, 0, nil, err
	}
	defer r.Close()
	for {
		_, err := r.next()
		if err == nil {
			tombs.note(r)
			continue
		}
		var fe *frameError
		if errors.As(err, &fe) {
			cut, err = tornTail(r, fe, last)
			if err != nil {
				return 0, 0, nil, err
			}
			break
		}
		if err == io.EOF {
			break
		}
		return 0, 0, nil, err
	}
	return r.seq, r.off, cut, nil
}

// tornTail describes the cut of the frame error fe of the last segment, if
// it is a torn tail that may be cut.
func tornTail(r *segmentReader, fe *frameError, last segment) (*event.Journal, error) {
	torn, err := r.torn(fe)
	if err != nil {
		return nil, err
	}
	cutBytes := r.size - fe.offset
	if !torn || cutBytes > maxTornBytes {
		return nil, fmt.Errorf("%w: segment %s: %v: not a torn tail; the journal was modified or damaged (run sandtrail verify)", ErrCorrupt, filepath.Base(last.path), fe)
	}
	return &event.Journal{Segment: filepath.Base(last.path), Offset: fe.offset, CutBytes: cutBytes, Detail: fe.kind.String()}, nil
}

// latestCovered returns the latest stored checkpoint, nil for none, and
// checks that it is of this journal's origin and that the size entries
// cover it.
func (j *Journal) latestCovered(size uint64) (*Checkpoint, error) {
	cp, err := j.latestStored()
	if err != nil {
		return nil, err
	}
	if cp == nil {
		return nil, nil
	}
	if cp.Origin != j.origin {
		return nil, fmt.Errorf("%w: checkpoints have origin %q, the journal is opened with %q", ErrInconsistent, cp.Origin, j.origin)
	}
	if size < cp.Size {
		return nil, fmt.Errorf("%w: %d entries, fewer than the %d that signed checkpoint covers (run sandtrail verify)", ErrCorrupt, size, cp.Size)
	}
	return cp, nil
}

// cutTail truncates the segment at path to offset, durably.
func cutTail(path string, offset int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cutting torn tail: %w", err)
	}
	err = f.Truncate(offset)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return fmt.Errorf("cutting torn tail: %w", err)
	}
	return nil
}

// loadHashes opens the hash file and brings it up to size entries. The
// stored hashes are trusted up to the latest checkpoint cp (they are synced
// before it is signed); the rest is rebuilt from the entries.
func (j *Journal) loadHashes(size uint64, cp *Checkpoint) error {
	hf, err := os.OpenFile(filepath.Join(j.dir, hashFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening hash file: %w", err)
	}
	j.hashes = hf
	st, err := hf.Stat()
	if err != nil {
		return fmt.Errorf("opening hash file: %w", err)
	}
	var from uint64
	if cp != nil {
		from = min(uint64(recordsCovered(st.Size()/tlog.HashSize)), cp.Size)
	}
	err = j.rebuildHashes(from, size, cp)
	if errors.Is(err, errRootMismatch) && from > 0 {
		j.log.Warn("hash file does not match the latest checkpoint; rebuilding it")
		err = j.rebuildHashes(0, size, cp)
	}
	if errors.Is(err, errRootMismatch) {
		return fmt.Errorf("%w: the entries do not match signed checkpoint %d (run sandtrail verify)", ErrCorrupt, cp.Size)
	}
	return err
}

// checkSegment reads every frame of a segment that is not the last one and
// returns the seq that follows it.
func checkSegment(s segment, tombs *lastTombstone) (uint64, error) {
	r, err := openSegmentReader(s.path, s.first)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for {
		_, err := r.next()
		if err == nil {
			tombs.note(r)
			continue
		}
		if err == io.EOF {
			return r.seq, nil
		}
		var fe *frameError
		if errors.As(err, &fe) {
			return 0, fmt.Errorf("%w: segment %s: %v (run sandtrail verify)", ErrCorrupt, filepath.Base(s.path), fe)
		}
		if err != nil {
			return 0, err
		}
	}
}

var errRootMismatch = errors.New("journal: root mismatch")

// rebuildHashes truncates the hash file to the stored hashes of from
// records and recomputes the rest from the entries, checking the root
// against cp when the tree reaches its size.
func (j *Journal) rebuildHashes(from, size uint64, cp *Checkpoint) error {
	count := tlog.StoredHashCount(int64(from))
	if err := j.hashes.Truncate(count * tlog.HashSize); err != nil {
		return fmt.Errorf("truncating hash file: %w", err)
	}
	e, err := loadEdge(from, &fileHashes{f: j.hashes, count: count})
	if err != nil {
		return err
	}
	check := func() error {
		if cp != nil && e.n == cp.Size && e.root(j.x) != cp.Root {
			return errRootMismatch
		}
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	var hb []tlog.Hash
	var out []byte
	off := count * tlog.HashSize
	flush := func() error {
		if _, err := j.hashes.WriteAt(out, off); err != nil {
			return fmt.Errorf("writing hash file: %w", err)
		}
		off += int64(len(out))
		out = out[:0]
		return nil
	}
	if from < size {
		err = scanFrames(j.dir, from, func(seq uint64, p []byte, pruned bool) error {
			if seq >= size {
				return errStop
			}
			hb = e.append(j.x, frameLeaf(j.x, p, pruned), hb[:0])
			for _, h := range hb {
				out = append(out, h[:]...)
			}
			if err := check(); err != nil {
				return err
			}
			if len(out) >= 1<<20 {
				return flush()
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
	}
	if e.n != size {
		return fmt.Errorf("%w: rebuilding hashes found %d entries, want %d", ErrCorrupt, e.n, size)
	}
	if err := flush(); err != nil {
		return err
	}
	if err := j.hashes.Sync(); err != nil {
		return fmt.Errorf("syncing hash file: %w", err)
	}
	j.hcount = off / tlog.HashSize
	j.edge = e
	return nil
}

// latestStored returns the newest checkpoint in the directory, parsed but
// not signature-checked (the writer holds only the signing key).
func (j *Journal) latestStored() (*Checkpoint, error) {
	files, _, err := readCheckpoints(j.dir, nil)
	if err != nil {
		return nil, err
	}
	var best *Checkpoint
	for _, f := range files {
		cp, err := parseUnverified(f.text)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint %s: %v", ErrCorrupt, f.name, err)
		}
		if f.name != cpLatest && cp.Size != f.size {
			return nil, fmt.Errorf("%w: checkpoint file %s holds size %d", ErrCorrupt, f.name, cp.Size)
		}
		if best == nil || cp.Size > best.Size {
			best = cp
		}
	}
	return best, nil
}

// Append assigns Seq (and V = event.SchemaVersion, and TS = now if zero)
// to each event, encodes it canonically (event.Marshal), writes it, and
// returns only once it is durable (fsync). Concurrent callers share one
// fsync (group commit). An invalid event (event.Validate) fails the whole
// call before anything is written. An event.KindSessionTerminate event makes a
// checkpoint right after it is durable, before Append returns. If ctx ends
// while the write is in flight, Append returns ctx's error but the events
// may still become durable. After a failed write the journal is broken and
// every Append fails: reopen it (Open recovers the tail).
func (j *Journal) Append(ctx context.Context, evs ...*event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	r := &request{evs: evs, rest: make([][]byte, len(evs)), done: make(chan error, 1)}
	now := time.Now().UTC()
	for i, ev := range evs {
		if ev == nil {
			return fmt.Errorf("appending event %d: nil event", i)
		}
		ev.V = event.SchemaVersion
		ev.Seq = 0
		if ev.TS.IsZero() {
			ev.TS = now
		}
		if err := ev.Validate(); err != nil {
			return fmt.Errorf("appending event %d: %w", i, err)
		}
		b, err := event.Marshal(ev)
		if err != nil {
			return fmt.Errorf("appending event %d: %w", i, err)
		}
		if len(b)+20 > event.MaxEncodedSize {
			return fmt.Errorf("appending event %d: %w: encoded size %d leaves no room for the seq", i, event.ErrInvalid, len(b))
		}
		rest, ok := bytes.CutPrefix(b, seqPrefix)
		if !ok || len(rest) < 2 || rest[0] != '0' || rest[1] != ',' {
			return fmt.Errorf("appending event %d: canonical encoding does not begin with %s0,", i, seqPrefix)
		}
		r.rest[i] = rest[1:]
		r.size += len(b) + 20 + frameHeaderSize
	}
	select {
	case j.reqs <- r:
	case <-j.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("appending: %w", ctx.Err())
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("appending (the events may still become durable): %w", ctx.Err())
	}
}
