package journal

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
)

// Status is the outcome of Verify.
type Status string

// The statuses, from best to worst.
const (
	// StatusIntact: every entry is covered by a verified checkpoint and
	// every checkpoint matches the recomputed tree.
	StatusIntact Status = "intact"
	// StatusUncovered: nothing is wrong, but some entries (or an incomplete
	// tail frame) come after the newest verified checkpoint, so no signature
	// vouches for them yet.
	StatusUncovered Status = "uncovered"
	// StatusTampered: an entry, a segment or a checkpoint is bad.
	StatusTampered Status = "tampered"
)

// Problem is one thing Verify found wrong.
type Problem struct {
	// Seq is the entry concerned, when there is one.
	Seq *uint64 `json:"seq,omitempty"`
	// File is the file concerned, relative to the journal directory, or
	// "held[i]" for the i-th held checkpoint.
	File string `json:"file,omitempty"`
	// Offset is the byte offset in File, for a bad frame.
	Offset *int64 `json:"offset,omitempty"`
	Msg    string `json:"msg"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Seq != nil {
		fmt.Fprintf(&b, "seq %d: ", *p.Seq)
	}
	if p.File != "" {
		b.WriteString(p.File)
		if p.Offset != nil {
			fmt.Fprintf(&b, "@%d", *p.Offset)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Report is what Verify found.
type Report struct {
	Status Status `json:"status"`
	// Entries is the number of entries read in order before verification
	// ended (all of them unless an entry was bad), pruned ones included.
	Entries uint64 `json:"entries"`
	// Pruned counts the tombstones among them: entries that Prune
	// replaced, whose leaf hashes still make up the tree.
	Pruned uint64 `json:"pruned"`
	// Root is the tree hash of those entries.
	Root tlog.Hash `json:"root"`
	// From is the seq the recomputation began at: 0 for Verify, the size
	// of the checkpoint it started from for VerifyFrom, whose entries
	// before it were not read again.
	From     uint64 `json:"from"`
	Segments int    `json:"segments"`
	// Checkpoints counts the checkpoints (stored and held) whose signature
	// verified and whose root matched the recomputed tree.
	Checkpoints int `json:"checkpoints"`
	// Held counts the caller's checkpoints among them.
	Held int `json:"held"`
	// Covered is the size of the newest verified checkpoint; Uncovered the
	// entries after it, which no signature vouches for yet.
	Covered   uint64 `json:"covered"`
	Uncovered uint64 `json:"uncovered"`
	// TailBytes counts the bytes of an incomplete frame at the end of the
	// last segment (a write in progress, or a crash not yet recovered).
	TailBytes int64 `json:"tail_bytes,omitempty"`
	// FirstBad is the first bad entry when the status is tampered and an
	// entry is to blame. When Exact is false it is the earliest entry that
	// may be bad: the first entry after the newest checkpoint that still
	// matched.
	FirstBad *uint64   `json:"first_bad,omitempty"`
	Exact    bool      `json:"exact,omitempty"`
	Problems []Problem `json:"problems,omitempty"`
}

func (r *Report) problem(p Problem) { r.Problems = append(r.Problems, p) }

// bad records that seq is bad, keeping the earliest.
func (r *Report) bad(seq uint64, exact bool) {
	if r.FirstBad == nil || seq < *r.FirstBad || seq == *r.FirstBad && exact {
		r.FirstBad = &seq
		r.Exact = exact
	}
}

// VerifyOption configures Verify.
type VerifyOption func(*verifyOptions)

type verifyOptions struct {
	origin string
	decode bool
}

// RequireOrigin makes Verify require that every checkpoint carry origin.
// Without it, all checkpoints must share the origin of the first.
func RequireOrigin(origin string) VerifyOption { return func(o *verifyOptions) { o.origin = origin } }

// DecodeEvents makes Verify also decode and validate every entry with
// event.Unmarshal. It is much slower and catches entries that a holder of
// the signing key wrote malformed.
func DecodeEvents() VerifyOption { return func(o *verifyOptions) { o.decode = true } }

type heldCheckpoint struct {
	cp   *Checkpoint
	file string
	held bool
}

// Verify recomputes the whole Merkle tree from the segments and checks it
// against every stored checkpoint and every extra checkpoint note in held
// (for example ones shipped off-host). Each checkpoint's signature must
// verify with verifiers: a signature by an unknown key is a problem. It
// never trusts the hash file, except to pinpoint which entry a checkpoint
// mismatch is due to, and then only for hashes the checkpoint authenticates.
//
// The journal is tampered when any entry frame is bad, an entry does not
// hold its own seq, segments leave a gap, a checkpoint is malformed, badly
// signed, signed by an unknown key or does not match the recomputed tree,
// or the journal has fewer entries than a checkpoint covers. Entries after
// the newest verified checkpoint are uncovered, which is not tampering
// unless one breaks the checks above.
//
// Verify returns the report and, when the journal is tampered, an error
// wrapping ErrTampered that names the first bad seq. Other errors (no such
// directory, unreadable files) come with a nil report.
func Verify(dir string, verifiers note.Verifiers, held [][]byte, opts ...VerifyOption) (*Report, error) {
	if verifiers == nil {
		return nil, errors.New("journal: verify: no verifier keys")
	}
	var o verifyOptions
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("verifying journal: %w", err)
	}
	rep := &Report{}
	cps, err := loadCheckpoints(dir, verifiers, held, o.origin, rep, nil)
	if err != nil {
		return nil, err
	}
	if err := verifyEntries(dir, cps, rep, o, &edge{}); err != nil {
		return nil, err
	}
	return conclude(rep)
}

// VerifyFrom verifies what was appended to the journal since seq from, at a
// cost proportional to it rather than to the whole journal: it starts at
// the newest stored checkpoint of size at most from whose signature
// verifies, takes the tree's right edge at that size from the hash file
// (trusted only because it hashes to the checkpoint's signed root), and
// recomputes the tree from there to the end, checking every later
// checkpoint as Verify does. Entries before that checkpoint are not read
// again, and older checkpoints are not checked: a full Verify remains the
// check of the whole journal. When no such checkpoint verifies or the hash
// file does not match it, VerifyFrom is Verify. Report.From says where it
// began.
func VerifyFrom(dir string, verifiers note.Verifiers, from uint64, opts ...VerifyOption) (*Report, error) {
	if verifiers == nil {
		return nil, errors.New("journal: verify: no verifier keys")
	}
	var o verifyOptions
	for _, opt := range opts {
		opt(&o)
	}
	base, start := baseCheckpoint(dir, verifiers, from, o.origin)
	if base == nil {
		return Verify(dir, verifiers, nil, opts...)
	}
	rep := &Report{From: base.Size}
	cps, err := loadCheckpoints(dir, verifiers, nil, base.Origin, rep, func(size uint64) bool { return size >= base.Size })
	if err != nil {
		return nil, err
	}
	// latest, always read, may be older than base (a crash between storing
	// a checkpoint and latest): it is not what this check starts from.
	cps = slices.DeleteFunc(cps, func(c heldCheckpoint) bool { return c.cp.Size < base.Size })
	if err := verifyEntries(dir, cps, rep, o, start); err != nil {
		return nil, err
	}
	return conclude(rep)
}

// baseCheckpoint returns the newest stored checkpoint of size at most from
// (and above 0) whose signature verifies, with the tree's right edge at its
// size read from the hash file, or nil when there is none or the hash
// file's edge does not hash to its root.
func baseCheckpoint(dir string, verifiers note.Verifiers, from uint64, origin string) (*Checkpoint, *edge) {
	ents, err := os.ReadDir(filepath.Join(dir, cpDir))
	if err != nil {
		return nil, nil
	}
	var sizes []uint64
	for _, e := range ents {
		if n, ok := parseCheckpointName(e.Name()); ok && n > 0 && n <= from && e.Type().IsRegular() {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	// A few tries: a bad newest checkpoint is for the full Verify to name.
	for i := len(sizes) - 1; i >= 0 && i >= len(sizes)-4; i-- {
		text, err := readLimited(filepath.Join(dir, cpDir, checkpointName(sizes[i])), maxCheckpointSize)
		if err != nil {
			continue
		}
		cp, err := ParseCheckpoint(text, verifiers)
		if err != nil || cp.Size != sizes[i] || origin != "" && cp.Origin != origin {
			continue
		}
		if e := storedEdge(dir, cp); e != nil {
			return cp, e
		}
		return nil, nil
	}
	return nil, nil
}

// storedEdge reads the right edge of cp's tree from the hash file and
// returns it when it hashes to cp's root, else nil.
func storedEdge(dir string, cp *Checkpoint) *edge {
	hr, err := OpenStoredHashes(dir, cp.Size)
	if err != nil {
		return nil
	}
	defer hr.Close()
	e, err := loadEdge(cp.Size, hr)
	if err != nil || e.root(newHasher()) != cp.Root {
		return nil
	}
	return e
}

// conclude sets the report's status and returns it, with an error wrapping
// ErrTampered when the journal is tampered.
func conclude(rep *Report) (*Report, error) {
	switch {
	case len(rep.Problems) > 0:
		rep.Status = StatusTampered
	case rep.Uncovered > 0 || rep.TailBytes > 0:
		rep.Status = StatusUncovered
	default:
		rep.Status = StatusIntact
	}
	if rep.Status == StatusTampered {
		where := "a checkpoint"
		if rep.FirstBad != nil {
			where = fmt.Sprintf("first bad seq %d", *rep.FirstBad)
			if !rep.Exact {
				where = fmt.Sprintf("first bad seq %d or later", *rep.FirstBad)
			}
		}
		return rep, fmt.Errorf("%w: %s: %s", ErrTampered, where, rep.Problems[0])
	}
	return rep, nil
}

// loadCheckpoints reads, checks and sorts the stored checkpoints (those
// that want, when not nil, accepts: see readCheckpoints) and the held ones,
// recording problems in rep.
func loadCheckpoints(dir string, verifiers note.Verifiers, held [][]byte, origin string, rep *Report, want func(size uint64) bool) ([]heldCheckpoint, error) {
	files, bad, err := readCheckpoints(dir, want)
	if err != nil {
		return nil, err
	}
	for _, name := range bad {
		rep.problem(Problem{File: filepath.Join(cpDir, name), Msg: "unexpected file among the checkpoints"})
	}
	var cps []heldCheckpoint
	for _, f := range files {
		file := filepath.Join(cpDir, f.name)
		cp, err := ParseCheckpoint(f.text, verifiers)
		if err != nil {
			rep.problem(Problem{File: file, Msg: err.Error()})
			continue
		}
		if f.name != cpLatest && cp.Size != f.size {
			rep.problem(Problem{File: file, Msg: fmt.Sprintf("file name says size %d, the checkpoint says %d", f.size, cp.Size)})
			continue
		}
		cps = append(cps, heldCheckpoint{cp: cp, file: file})
	}
	for i, h := range held {
		file := fmt.Sprintf("held[%d]", i)
		cp, err := parseCheckpoint(h, verifiers, false)
		if err != nil {
			rep.problem(Problem{File: file, Msg: err.Error()})
			continue
		}
		cps = append(cps, heldCheckpoint{cp: cp, file: file, held: true})
	}
	for _, c := range cps {
		if origin == "" {
			origin = c.cp.Origin
		}
		if c.cp.Origin != origin {
			rep.problem(Problem{File: c.file, Msg: fmt.Sprintf("origin %q, want %q", event.Clip(c.cp.Origin, 64), event.Clip(origin, 64))})
		}
	}
	slices.SortStableFunc(cps, func(a, b heldCheckpoint) int {
		switch {
		case a.cp.Size < b.cp.Size:
			return -1
		case a.cp.Size > b.cp.Size:
			return 1
		}
		return 0
	})
	return cps, nil
}

// verifyEntries reads the segments from the entry at start.n, appending to
// start (the tree's right edge at that size) and comparing the tree with
// each checkpoint as it reaches its size. A reader goroutine
// checks the frames and packs payloads into chunks, workers hash the leaves
// of each chunk in parallel, and this goroutine folds them into the tree in
// order (see readChunks).
func verifyEntries(dir string, cps []heldCheckpoint, rep *Report, o verifyOptions, start *edge) error {
	segs, err := listSegments(dir)
	if errors.Is(err, ErrCorrupt) {
		rep.problem(Problem{Msg: err.Error()})
		rep.bad(0, false)
		return nil
	}
	if err != nil {
		return err
	}
	first := 0
	for i, s := range segs {
		if s.first <= start.n {
			first = i
		}
	}
	segs = segs[first:]
	rep.Segments = len(segs)
	v := &verifier{dir: dir, segs: segs, cps: cps, rep: rep, x: newHasher(), e: *start}
	v.stopped = !v.compare()
	if !v.stopped {
		quit := make(chan struct{})
		chunks := readChunks(segs, start.n, o.decode, quit)
		v.consume(chunks)
		close(quit)
		for c := range chunks { // let the reader and the workers finish
			<-c.ready
		}
	}
	if v.ioErr != nil {
		return v.ioErr
	}
	v.finish()
	return nil
}

// verifier folds the entries of a journal into the tree in order and
// compares the tree with each checkpoint as it reaches the checkpoint's
// size, recording what it finds in rep.
type verifier struct {
	dir  string
	segs []segment
	cps  []heldCheckpoint // sorted by size
	rep  *Report
	x    *hasher
	e    edge
	next int    // the next checkpoint to compare
	good uint64 // the size of the newest checkpoint that matched
	// goodCount and heldCount count the checkpoints that matched, and the
	// held ones among them.
	goodCount, heldCount int
	stopped              bool  // a bad entry or checkpoint ended the reading
	ioErr                error // reading failed
	// uncoveredPruned are the tombstones read since the newest checkpoint
	// that matched: one that no checkpoint covers was not written by Prune.
	uncoveredPruned []uint64
	pruned          uint64
	// tombstones are the seqs of every tombstone read, and named the
	// ranges the retention.prune entries read name: each tombstone must
	// be named by one.
	tombstones, named []event.SeqRange
}

// compare checks the checkpoints of the current size; it returns false on a
// mismatch, after locating the first bad entry.
func (v *verifier) compare() bool {
	if v.next >= len(v.cps) || v.cps[v.next].cp.Size != v.e.n {
		return true
	}
	root := v.e.root(v.x)
	ok := true
	for ; v.next < len(v.cps) && v.cps[v.next].cp.Size == v.e.n; v.next++ {
		c := v.cps[v.next]
		if c.cp.Root != root {
			v.rep.problem(Problem{File: c.file, Msg: fmt.Sprintf("root hash of the %d entries does not match the signed checkpoint", v.e.n)})
			ok = false
			continue
		}
		v.goodCount++
		if c.held {
			v.heldCount++
		}
	}
	if ok {
		v.good = v.e.n
		v.uncoveredPruned = v.uncoveredPruned[:0]
		return true
	}
	seq, exact := locate(v.dir, v.good, v.e.n, v.cps[v.next-1].cp.Root)
	v.rep.bad(seq, exact)
	return false
}

// consume folds the chunks into the tree until one is bad or reading ends.
func (v *verifier) consume(chunks <-chan *chunk) {
	for c := range chunks {
		<-c.ready
		if !v.add(c) {
			v.stopped = true
			return
		}
		if c.stop != nil {
			v.end(c.stop)
		}
		c.release()
	}
}

// add folds the entries of chunk c into the tree. It returns false when an
// entry does not decode or a checkpoint does not match.
func (v *verifier) add(c *chunk) bool {
	v.named = append(v.named, c.named...)
	if c.full && c.decodeAt < 0 && (v.next >= len(v.cps) || v.cps[v.next].cp.Size >= c.first+chunkEntries) {
		// A complete subtree with no checkpoint inside: add its root.
		for _, i := range c.prunedAt {
			v.notePruned(c.first + uint64(i))
		}
		v.e.appendNode(v.x, chunkLevel, c.root)
		if !v.compare() {
			return false
		}
		c.leaves = c.leaves[:0]
	}
	pi := 0
	for i, leaf := range c.leaves {
		if pi < len(c.prunedAt) && c.prunedAt[pi] == i {
			v.notePruned(c.first + uint64(i))
			pi++
		}
		if i == c.decodeAt {
			seq := c.first + uint64(i)
			off := c.offsets[i]
			v.rep.problem(Problem{Seq: &seq, File: filepath.Base(v.segs[c.seg].path), Offset: &off, Msg: c.decodeErr.Error()})
			v.rep.bad(seq, true)
			return false
		}
		v.e.appendLeaf(v.x, leaf)
		if !v.compare() {
			return false
		}
	}
	return true
}

// notePruned counts the tombstone of entry seq.
func (v *verifier) notePruned(seq uint64) {
	v.pruned++
	v.uncoveredPruned = append(v.uncoveredPruned, seq)
	if n := len(v.tombstones); n > 0 && v.tombstones[n-1].Last+1 == seq {
		v.tombstones[n-1].Last = seq
	} else {
		v.tombstones = append(v.tombstones, event.SeqRange{First: seq, Last: seq})
	}
}

// end records why reading ended: a read error, a torn tail or a bad frame
// or segment.
func (v *verifier) end(st *chunkStop) {
	switch {
	case st.err != nil:
		v.ioErr = st.err
	case st.tail > 0:
		v.rep.TailBytes = st.tail
	default:
		seq := st.seq
		p := Problem{File: st.file, Msg: st.msg}
		if st.offset >= 0 {
			off := st.offset
			p.Seq, p.Offset = &seq, &off
		}
		v.rep.problem(p)
		v.rep.bad(seq, true)
		pinpoint(v.dir, v.cps, v.next, v.good, v.rep)
		v.stopped = true
	}
}

// finish fills in the report once all entries are read: the tree, the
// checkpoints beyond the entries, and the counts.
func (v *verifier) finish() {
	rep := v.rep
	rep.Entries = v.e.n
	rep.Root = v.e.root(v.x)
	if !v.stopped {
		// Checkpoints beyond the entries: the journal was truncated.
		for ; v.next < len(v.cps); v.next++ {
			c := v.cps[v.next]
			rep.problem(Problem{File: c.file, Msg: fmt.Sprintf("the checkpoint covers %d entries but the journal has %d (truncated)", c.cp.Size, v.e.n)})
			rep.bad(v.e.n, true)
		}
		if len(v.uncoveredPruned) > 0 {
			seq := v.uncoveredPruned[0]
			rep.problem(Problem{Seq: &seq, Msg: "a tombstone that no checkpoint covers: the journal prunes only entries a signed checkpoint covers, so this entry was erased by someone else"})
			rep.bad(seq, true)
		}
		if seq, ok := firstUnnamed(v.named, v.tombstones); ok {
			rep.problem(Problem{Seq: &seq, Msg: "a tombstone that no retention.prune entry names: the journal prunes only what such an entry records, so this entry was erased by someone else"})
			rep.bad(seq, true)
		}
	}
	rep.Pruned = v.pruned
	rep.Checkpoints = v.goodCount
	rep.Held = v.heldCount
	rep.Covered = v.good
	if len(rep.Problems) == 0 {
		rep.Uncovered = v.e.n - v.good
	}
}

// Chunks of verified entries end at multiples of chunkEntries (and at the
// end of each segment), so that most are complete subtrees.
const (
	chunkLevel   = 12
	chunkEntries = 1 << chunkLevel
)

// appendNode adds the root h of a complete subtree of 2^level leaves; e.n
// must be a multiple of 2^level.
func (e *edge) appendNode(x *hasher, level int, h tlog.Hash) {
	l := level
	for ; e.n>>l&1 == 1; l++ {
		h = x.node(e.level[l], h)
	}
	e.level[l] = h
	e.n += 1 << level
}

// chunk is a run of consecutive entries of one segment on their way
// through verification.
type chunk struct {
	seg     int // index into the segments
	first   uint64
	data    []byte  // the payloads, back to back, each after a 0x00 byte
	ends    []int   // end of each payload in data
	offsets []int64 // frame offset of each entry in its segment
	// prunedAt are the indexes of the tombstones, whose data is the leaf
	// hash they keep rather than a payload.
	prunedAt []int
	// named are the seq ranges that the chunk's retention.prune entries
	// name as pruned.
	named     []event.SeqRange
	leaves    []tlog.Hash
	full      bool      // the chunk is the complete subtree at first
	root      tlog.Hash // its root, when full
	decode    bool
	decodeAt  int // index of the first entry that does not decode, or -1
	decodeErr error
	stop      *chunkStop // why reading ended after this chunk, if it did
	ready     chan struct{}
	pool      *sync.Pool
}

// chunkStop says why reading ended.
type chunkStop struct {
	err    error // reading failed
	tail   int64 // a torn tail of this many bytes
	seq    uint64
	file   string
	offset int64 // -1 when no frame is concerned
	msg    string
}

func (c *chunk) release() {
	c.data, c.ends, c.offsets, c.leaves, c.prunedAt = c.data[:0], c.ends[:0], c.offsets[:0], c.leaves[:0], c.prunedAt[:0]
	c.named = c.named[:0]
	c.stop, c.decodeErr = nil, nil
	c.pool.Put(c)
}

// hash computes the chunk's leaf hashes (and decodes its events).
func (c *chunk) hash(x *hasher) {
	c.decodeAt = -1
	c.leaves = c.leaves[:0]
	start, pi := 0, 0
	for i, end := range c.ends {
		if pi < len(c.prunedAt) && c.prunedAt[pi] == i {
			// A tombstone's stored leaf hash is its leaf.
			pi++
			c.leaves = append(c.leaves, tlog.Hash(c.data[start:end]))
			start = end
			continue
		}
		// Each payload is stored after a 0x00 byte, so the leaf hash,
		// SHA-256(0x00 || payload), is one call over the stored bytes.
		p := c.data[start+1 : end]
		if c.decode && c.decodeAt < 0 {
			if _, err := event.Unmarshal(p); err != nil {
				c.decodeAt, c.decodeErr = i, err
			}
		}
		c.leaves = append(c.leaves, sha256.Sum256(c.data[start:end]))
		start = end
	}
	c.full = c.first%chunkEntries == 0 && len(c.leaves) == chunkEntries
	if c.full {
		e := &edge{}
		for _, h := range c.leaves {
			e.appendLeaf(x, h)
		}
		c.root = e.root(x)
	}
	close(c.ready)
}

// readChunks reads the segments in a goroutine, checking every frame, and
// returns their entries from seq from on as chunks, in order, each hashed by a pool of
// workers before its ready channel closes. Reading ends at the first bad
// frame or segment gap, at a torn tail, or when quit closes; the last chunk
// says why in stop.
func readChunks(segs []segment, from uint64, decode bool, quit <-chan struct{}) <-chan *chunk {
	workers := min(runtime.GOMAXPROCS(0), 4)
	out := make(chan *chunk, 2*workers)
	work := make(chan *chunk, 2*workers)
	pool := &sync.Pool{}
	pool.New = func() any { return &chunk{pool: pool} }
	for range workers {
		go func() {
			x := newHasher()
			for c := range work {
				c.hash(x)
			}
		}()
	}
	r := &chunkReader{segs: segs, from: from, decode: decode, quit: quit, out: out, work: work, pool: pool}
	go r.run()
	return out
}

// chunkReader is readChunks' reader goroutine: it fills chunk c with the
// entries it reads and sends each chunk, in order, both to out and to the
// workers.
type chunkReader struct {
	segs   []segment
	from   uint64 // entries before it are checked but not sent
	decode bool
	quit   <-chan struct{}
	out    chan<- *chunk
	work   chan<- *chunk
	pool   *sync.Pool
	c      *chunk
}

func (r *chunkReader) run() {
	defer close(r.out)
	defer close(r.work)
	r.c = r.pool.Get().(*chunk)
	want := uint64(0)
	if len(r.segs) > 0 && r.segs[0].first <= r.from {
		// Verifying from r.from: the segments before this one are not read.
		want = r.segs[0].first
	}
	for i, s := range r.segs {
		next, ok := r.segment(i, s, want)
		if !ok {
			return
		}
		want = next
	}
	r.emit(want, len(r.segs))
}

// emit sends the current chunk and starts the next one at seq next in
// segment seg. It returns false when quit closed first.
func (r *chunkReader) emit(next uint64, seg int) bool {
	r.c.ready = make(chan struct{})
	r.c.decode = r.decode
	select {
	case r.out <- r.c:
	case <-r.quit:
		return false
	}
	r.work <- r.c
	r.c = r.pool.Get().(*chunk)
	r.c.first, r.c.seg = next, seg
	return true
}

// segment reads segment i, s, which must start at seq want, into chunks. It
// returns the seq that follows the segment, or false when reading ended.
func (r *chunkReader) segment(i int, s segment, want uint64) (uint64, bool) {
	name := filepath.Base(s.path)
	if s.first != want {
		r.c.stop = &chunkStop{seq: want, file: name, offset: -1,
			msg: fmt.Sprintf("segment starts at seq %d, want %d (a segment is missing or was inserted)", s.first, want)}
		r.emit(want, i)
		return 0, false
	}
	if len(r.c.ends) > 0 && !r.emit(want, i) {
		return 0, false
	}
	r.c.first, r.c.seg = max(want, r.from), i
	sr, err := openSegmentReader(s.path, s.first)
	if err != nil {
		r.c.stop = &chunkStop{err: err}
		r.emit(want, i)
		return 0, false
	}
	for {
		off := sr.off
		p, err := sr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			r.c.stop = frameStop(sr, err, name, i == len(r.segs)-1)
			sr.Close()
			r.emit(sr.seq, i)
			return 0, false
		}
		if sr.seq <= r.from {
			continue // the frame's seq, sr.seq-1, is before from
		}
		if sr.pruned {
			r.c.addPruned(tombstoneLeaf(p), off)
		} else {
			r.c.add(p, off)
			if ranges, ok := pruneRecordRanges(p); ok {
				r.c.named = append(r.c.named, ranges...)
			}
		}
		if sr.seq%chunkEntries == 0 && !r.emit(sr.seq, i) {
			sr.Close()
			return 0, false
		}
	}
	sr.Close()
	return sr.seq, true
}

// frameStop says why reading ended at err, an error reading a frame of the
// segment name: a torn tail if it is one in the last segment, else a bad
// frame or a read error.
func frameStop(sr *segmentReader, err error, name string, last bool) *chunkStop {
	var fe *frameError
	if !errors.As(err, &fe) {
		return &chunkStop{err: err}
	}
	torn, terr := sr.torn(fe)
	switch {
	case terr != nil:
		return &chunkStop{err: terr}
	case torn && last:
		return &chunkStop{tail: sr.size - fe.offset}
	}
	return &chunkStop{seq: fe.seq, file: name, offset: fe.offset, msg: fe.kind.String() + detail(fe.detail)}
}

// add appends the payload p of the frame at offset off.
func (c *chunk) add(p []byte, off int64) {
	c.data = append(c.data, 0) // the leaf prefix, see hash
	c.data = append(c.data, p...)
	c.ends = append(c.ends, len(c.data))
	c.offsets = append(c.offsets, off)
}

// addPruned appends the tombstone, keeping leaf, of the frame at offset
// off.
func (c *chunk) addPruned(leaf tlog.Hash, off int64) {
	c.prunedAt = append(c.prunedAt, len(c.ends))
	c.data = append(c.data, leaf[:]...)
	c.ends = append(c.ends, len(c.data))
	c.offsets = append(c.offsets, off)
}

// pinpoint looks, after an entry was found bad in order, for an earlier
// entry that the next checkpoint proves bad: an entry inserted with the
// right seq only shows as a seq mismatch in the entry after it.
func pinpoint(dir string, cps []heldCheckpoint, next int, good uint64, rep *Report) {
	if next >= len(cps) {
		return
	}
	if seq, exact := locate(dir, good, cps[next].cp.Size, cps[next].cp.Root); exact {
		rep.bad(seq, true)
	}
}

func detail(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// appendLeaf adds leaf hash h to the edge.
func (e *edge) appendLeaf(x *hasher, h tlog.Hash) {
	l := 0
	for ; e.n>>l&1 == 1; l++ {
		h = x.node(e.level[l], h)
	}
	e.level[l] = h
	e.n++
}

// locate finds which entry in [from, size) makes the tree of size entries
// differ from root. It compares each entry's leaf hash with the one in the
// hash file, trusting a stored leaf hash only when its inclusion proof (from
// the same file) verifies against the signed root: then a differing entry
// is proven bad, and equal ones before it proven good. If the hash file
// cannot be trusted it returns from, not exact.
func locate(dir string, from, size uint64, root tlog.Hash) (uint64, bool) {
	hr, err := OpenStoredHashes(dir, size)
	if err != nil {
		return from, false
	}
	defer hr.Close()
	x := newHasher()
	found, exact := from, false
	err = scanFrames(dir, from, func(seq uint64, p []byte, pruned bool) error {
		if seq >= size {
			return errStop
		}
		stored, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq))})
		if err != nil {
			return err
		}
		proof, err := tlog.ProveRecord(int64(size), int64(seq), hr)
		if err != nil {
			return err
		}
		if tlog.CheckRecord(proof, int64(size), root, int64(seq), stored[0]) != nil {
			return errStop // the hash file is not the signed tree
		}
		if frameLeaf(x, p, pruned) != stored[0] {
			found, exact = seq, true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return from, false
	}
	return found, exact
}

// LeafHash returns the Merkle leaf hash of an entry's canonical encoding.
func LeafHash(raw []byte) tlog.Hash { return tlog.RecordHash(raw) }

// Prove returns an inclusion proof of entry seq in the tree of checkpoint
// cp, built from the hash file. Before returning it, Prove checks the proof
// against cp's root with the leaf hash recomputed from the entry itself, so
// a returned proof always verifies (tlog.CheckRecord). Errors wrap
// ErrNotFound when cp does not cover seq, and ErrCorrupt when the entry or
// the hash file does not match cp. A pruned entry is proven by the leaf
// hash its tombstone keeps. Prove does not check cp's signature:
// pass a checkpoint from ParseCheckpoint or ReadCheckpoint.
func Prove(dir string, seq uint64, cp *Checkpoint) (tlog.RecordProof, error) {
	if cp == nil {
		return nil, errors.New("journal: prove: nil checkpoint")
	}
	if seq >= cp.Size {
		return nil, fmt.Errorf("%w: entry %d is not covered by the checkpoint of size %d", ErrNotFound, seq, cp.Size)
	}
	hr, err := OpenStoredHashes(dir, cp.Size)
	if err != nil {
		return nil, err
	}
	defer hr.Close()
	proof, err := tlog.ProveRecord(int64(cp.Size), int64(seq), hr)
	if err != nil {
		return nil, fmt.Errorf("proving entry %d: %w", seq, err)
	}
	raw, err := Entry(dir, seq)
	var pe *PrunedError
	leaf := LeafHash(raw)
	switch {
	case errors.As(err, &pe):
		leaf = pe.Leaf
	case errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("%w: entry %d, which the checkpoint of size %d covers, is missing or unreadable", ErrCorrupt, seq, cp.Size)
	case err != nil:
		return nil, err
	}
	if err := tlog.CheckRecord(proof, int64(cp.Size), cp.Root, int64(seq), leaf); err != nil {
		return nil, fmt.Errorf("%w: entry %d does not verify against the checkpoint of size %d: %v", ErrCorrupt, seq, cp.Size, err)
	}
	return proof, nil
}
