package central

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/journal"
)

// Keys are the hosts' journal verifier keys, by host name (the name the
// host publishes under).
type Keys map[string]note.Verifier

// WithKeys sets the hosts' keys (default: none, so every host is unknown).
func WithKeys(k Keys) Option { return func(o *options) { o.keys = k } }

// WithGapGrace sets how long a gap under a signed checkpoint may stay open
// before it is raised (default 2 minutes): entries of one host can arrive
// out of order from several aggregators, or late after an outage.
func WithGapGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// LoadKeys reads dir's <host>.pub files, each a host's journal verifier
// key (the journal's .pub file, as `sandtrail keys` shows it).
func LoadKeys(dir string) (Keys, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pub"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("central store: no <host>.pub key in %s", dir)
	}
	k := Keys{}
	for _, f := range files {
		v, err := journal.LoadVerifier(f)
		if err != nil {
			return nil, fmt.Errorf("central store: key %s: %w", f, err)
		}
		k[strings.TrimSuffix(filepath.Base(f), ".pub")] = v
	}
	return k, nil
}

// compactRange is the right edge of a Merkle tree of n leaves: the roots of
// its perfect subtrees, largest first, one for each bit set in n. It takes
// leaves one at a time and gives the tree's RFC 6962 root at any size.
type compactRange struct {
	n     uint64
	roots []tlog.Hash
}

func (c *compactRange) append(leaf tlog.Hash) {
	c.roots = append(c.roots, leaf)
	for k := c.n; k&1 == 1; k >>= 1 {
		l := len(c.roots)
		c.roots = append(c.roots[:l-2], tlog.NodeHash(c.roots[l-2], c.roots[l-1]))
	}
	c.n++
}

// root is the tree's root hash (that of the empty string's leaf tree for
// n = 0, which no checkpoint names).
func (c *compactRange) root() tlog.Hash {
	if len(c.roots) == 0 {
		return tlog.Hash{}
	}
	h := c.roots[len(c.roots)-1]
	for i := len(c.roots) - 2; i >= 0; i-- {
		h = tlog.NodeHash(c.roots[i], h)
	}
	return h
}

func (c *compactRange) marshal() []byte {
	b := make([]byte, 0, len(c.roots)*tlog.HashSize)
	for _, h := range c.roots {
		b = append(b, h[:]...)
	}
	return b
}

func unmarshalRange(n uint64, b []byte) (*compactRange, error) {
	if len(b) != bits.OnesCount64(n)*tlog.HashSize {
		return nil, fmt.Errorf("chain state of size %d has %d bytes of hashes", n, len(b))
	}
	c := &compactRange{n: n}
	for i := 0; i < len(b); i += tlog.HashSize {
		c.roots = append(c.roots, tlog.Hash(b[i:i+tlog.HashSize]))
	}
	return c, nil
}

// AddCheckpoint takes a signed checkpoint that host published. One that
// does not verify against the host's key raises the problem it has; one
// of a size the store holds with another root is a fork.
func (s *Store) AddCheckpoint(ctx context.Context, host string, msg []byte, size uint64) error {
	seq := uint64(0)
	if size > 0 {
		seq = size - 1
	}
	key := s.keys[host]
	if key == nil {
		return s.Raise(ctx, unknownHost(host, seq))
	}
	cp, err := journal.ParseCheckpoint(msg, note.VerifierList(key))
	switch {
	case errors.Is(err, journal.ErrUnknownKey):
		return s.Raise(ctx, Problem{Host: host, Seq: seq, Kind: ProblemUnknownKey,
			Detail: fmt.Sprintf("checkpoint %d is not signed by host %s's key (%v)", size, host, err)})
	case errors.Is(err, journal.ErrBadSignature):
		return s.Raise(ctx, Problem{Host: host, Seq: seq, Kind: ProblemBadSignature,
			Detail: fmt.Sprintf("checkpoint %d has a bad signature: %v", size, err)})
	case err != nil:
		return s.Raise(ctx, Problem{Host: host, Seq: seq, Kind: ProblemBadCheckpoint,
			Detail: fmt.Sprintf("checkpoint %d does not parse: %v", size, err)})
	case cp.Size == 0:
		return nil
	}
	hids, err := s.hostIDs(ctx, []string{host})
	if err != nil {
		return err
	}
	var held []byte
	err = s.pool.QueryRow(ctx, `WITH ins AS (INSERT INTO checkpoints(hid, size, root, note) VALUES($1, $2, $3, $4)
		ON CONFLICT DO NOTHING RETURNING root) SELECT root FROM ins UNION ALL SELECT root FROM checkpoints WHERE hid = $1 AND size = $2`,
		hids[host], int64(cp.Size), cp.Root[:], string(cp.Text)).Scan(&held)
	if err != nil {
		return fmt.Errorf("central store: storing checkpoint %d of %s: %w", cp.Size, host, err)
	}
	if !bytes.Equal(held, cp.Root[:]) {
		return s.Raise(ctx, Problem{Host: host, Seq: cp.Size - 1, Kind: ProblemCheckpointFork,
			Detail: fmt.Sprintf("host %s signed two checkpoints of size %d with different roots", host, cp.Size)})
	}
	return nil
}

func unknownHost(host string, seq uint64) Problem {
	return Problem{Host: host, Seq: seq, Kind: ProblemUnknownHost, PerHost: true,
		Detail: fmt.Sprintf("entries published as host %s, whose journal key this store was not given: a fake host, or one not yet enrolled", host)}
}
