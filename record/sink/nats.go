package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandtrail/sandtrail/record/event"
)

// NATS is a Sink that publishes each entry to a JetStream stream and
// waits for the stream's acks: subject sandtrail.<host>.<kind> (the
// kind's dots as underscores), message id (Nats-Msg-Id) <host>:<seq> and
// the line's digest (MsgID), so that the stream's duplicate window drops
// what a retried batch sends again; a signed checkpoint goes to
// sandtrail.<host>.checkpoint as <host>:checkpoint:<size>:<digest>.
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	host    string
	cfg     NATSConfig
	ensured bool // the stream is known to exist; Write is not called concurrently
}

var _ Sink = (*NATS)(nil)

// NATSConfig configures a NATS sink.
type NATSConfig struct {
	// URL is the server (nats://127.0.0.1:4222), or several,
	// comma-separated.
	URL string
	// Stream is the JetStream stream, created when missing with the
	// subjects sandtrail.> and file storage (default "SANDTRAIL");
	// Replicas its replicas (1).
	Stream   string
	Replicas int
	// Host names this machine in subjects and message ids.
	Host string
	// Duplicates is the stream's duplicate window (default 10 minutes):
	// a batch retried within it is not stored twice.
	Duplicates time.Duration
	// CredsFile is the host's NATS credentials (a .creds file), CAFile
	// the CA of a tls:// server; none when empty.
	CredsFile, CAFile string
}

// NATSOptions are the connection options of a sandtrail NATS client: it
// reconnects for ever, with the credentials and CA given.
func NATSOptions(name, credsFile, caFile string) []nats.Option {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(200 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	if credsFile != "" {
		opts = append(opts, nats.UserCredentials(credsFile))
	}
	if caFile != "" {
		opts = append(opts, nats.RootCAs(caFile))
	}
	return opts
}

// NewNATS connects to the server, reconnecting for ever when it goes away,
// and makes sure the stream exists, creating it when it is missing. A
// server that is not reachable yet, or a cluster that cannot place the
// stream yet, is no error: the sink lags, and its first write makes sure
// of the stream again (the error is the write's, in the sink's status).
func NewNATS(ctx context.Context, c NATSConfig) (*NATS, error) {
	if c.Stream == "" {
		c.Stream = "SANDTRAIL"
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Duplicates <= 0 {
		c.Duplicates = 10 * time.Minute
	}
	if !validHostName(c.Host) {
		return nil, fmt.Errorf("nats sink: host %q: a nats sink's host id is 1 to %d letters, digits, '-' and '.', which name it in subjects", c.Host, maxHostName)
	}
	nc, err := nats.Connect(c.URL, NATSOptions("sandtrail "+c.Host, c.CredsFile, c.CAFile)...)
	if err != nil {
		return nil, fmt.Errorf("nats sink: connecting to %s: %w", c.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	s := &NATS{nc: nc, js: js, host: token(c.Host), cfg: c}
	_ = s.ensureStream(ctx)
	return s, nil
}

// ensureStream makes sure the stream exists, once. An existing stream is
// used as it is: a host may publish to it, but changing it (its
// retention, replicas) is its operator's, and the deployment's NATS
// permissions give hosts no more than the stream's info
// (docs/deployment.md).
func (s *NATS) ensureStream(ctx context.Context) error {
	if s.ensured {
		return nil
	}
	c := s.cfg
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.js.Stream(ctx, c.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: c.Stream, Subjects: []string{"sandtrail.>"},
			Storage: jetstream.FileStorage, Replicas: c.Replicas, Duplicates: c.Duplicates})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			_, err = s.js.Stream(ctx, c.Stream) // another host made it first
		}
	}
	if err != nil {
		return fmt.Errorf("nats sink: stream %s: %w", c.Stream, err)
	}
	s.ensured = true
	return nil
}

// maxHostName bounds a host id in subjects.
const maxHostName = 128

// validHostName says whether a nats sink may publish as host: its token
// (dots as underscores) must name it alone, so it has no underscore, and
// be a subject token a store can key by.
func validHostName(host string) bool {
	return !strings.Contains(host, "_") && validToken(strings.ReplaceAll(host, ".", "_"), maxHostName)
}

// validToken says whether s is a token a sink makes of a host id or a
// kind: letters, digits, '_' and '-', at most max bytes.
func validToken(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// token makes s a single subject token: no dots, spaces, wildcards.
func token(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', ' ', '*', '>', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// MsgID is the Nats-Msg-Id of entry seq of host, whose line is data:
// "<host>:<seq>:<digest>", the digest the first 128 bits of the line's
// SHA-256 in hex. The stream drops a message whose id it holds within its
// duplicate window; the digest makes that only the same entry sent again
// (a retried batch), never a message that another publisher sent first
// under a guessed id: a host's next seqs are easy to guess, its next lines
// are not. ':' is in no host token, so no two hosts' ids meet.
func MsgID(host string, seq uint64, data []byte) string {
	return token(host) + ":" + strconv.FormatUint(seq, 10) + ":" + digest(data)
}

// checkpointID is the Nats-Msg-Id of host's checkpoint of size size, whose
// line is data: "<host>:checkpoint:<size>:<digest>".
func checkpointID(host string, size uint64, data []byte) string {
	return token(host) + ":checkpoint:" + strconv.FormatUint(size, 10) + ":" + digest(data)
}

// digest is the id's digest of data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// MaxSeq is the largest seq (and checkpoint size) a message may name:
// PostgreSQL's bigint holds 2^63−1, and the store adds to seqs. No journal
// comes near it; a message beyond it is not one a sink sent.
const MaxSeq = 1<<62 - 1

// HostToken is host as the subjects and message ids name it: dots as
// underscores.
func HostToken(host string) string { return token(host) }

// Subject is the subject of an entry of kind from host.
func Subject(host, kind string) string { return "sandtrail." + token(host) + "." + token(kind) }

// NATSMessage is what a message of the stream says it is, read from its
// subject and message id: an entry (Seq) or a checkpoint (Checkpoint, its
// size) of Host.
type NATSMessage struct {
	Host       string
	Kind       string
	Seq        uint64
	Checkpoint uint64
}

// ParseNATSMessage reads the subject, Nats-Msg-Id and data of a message a
// NATS sink published. The subject and the id must name one host, and the
// id's digest must be the data's.
func ParseNATSMessage(subject, id string, data []byte) (NATSMessage, error) {
	var m NATSMessage
	parts := strings.Split(subject, ".")
	if len(parts) != 3 || parts[0] != "sandtrail" || parts[1] == "" || parts[2] == "" {
		return m, fmt.Errorf("subject %q: want sandtrail.<host>.<kind>", event.Clip(subject, 80))
	}
	m.Host, m.Kind = parts[1], parts[2]
	if !validToken(m.Host, maxHostName) || !validToken(m.Kind, 64) {
		return NATSMessage{}, fmt.Errorf("subject %q: host and kind must be tokens of letters, digits, '_' and '-'", event.Clip(subject, 80))
	}
	rest, ok := strings.CutPrefix(id, m.Host+":")
	if !ok {
		return m, fmt.Errorf("message id %q does not name the subject's host %s", event.Clip(id, 80), m.Host)
	}
	rest, isCheckpoint := strings.CutPrefix(rest, "checkpoint:")
	num, sum, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > MaxSeq || strconv.FormatUint(n, 10) != num {
		return m, fmt.Errorf("message id %q: want <host>:<seq>:<digest> or <host>:checkpoint:<size>:<digest>, seq at most %d", event.Clip(id, 80), uint64(MaxSeq))
	}
	if isCheckpoint != (m.Kind == "checkpoint") {
		return m, fmt.Errorf("message id %q on subject %q: a checkpoint needs both", event.Clip(id, 80), event.Clip(subject, 80))
	}
	if isCheckpoint {
		if n == 0 {
			return m, fmt.Errorf("message id %q: a checkpoint of size 0", event.Clip(id, 80))
		}
		m.Checkpoint, m.Seq = n, n-1
	} else {
		m.Seq = n
	}
	if sum != digest(data) {
		return m, fmt.Errorf("message id %q: its digest is not its data's (%s)", event.Clip(id, 80), digest(data))
	}
	return m, nil
}

// Write publishes the batch asynchronously and returns once the stream
// acknowledged every entry, or with the first error.
func (s *NATS) Write(ctx context.Context, batch []Entry) error {
	if err := s.ensureStream(ctx); err != nil {
		return err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, e := range batch {
		msg := &nats.Msg{Subject: Subject(s.host, e.Kind), Data: e.Line}
		id := MsgID(s.host, e.Seq, e.Line)
		if e.Checkpoint != 0 {
			id = checkpointID(s.host, e.Checkpoint, e.Line)
		}
		f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(id))
		if err != nil {
			return fmt.Errorf("nats sink: publishing seq %d: %w", e.Seq, err)
		}
		futures = append(futures, f)
	}
	var errs []error
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("nats sink: seq %d: %w", batch[i].Seq, err))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Close drains the connection.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
