package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is a Sink that publishes each entry to a JetStream stream and
// waits for the stream's acks: subject sandtrail.<host>.<kind> (the
// kind's dots as underscores), message id (Nats-Msg-Id) <host>-<seq>, so
// that the stream's duplicate window drops what a retried batch sends
// again; a signed checkpoint goes to sandtrail.<host>.checkpoint as
// <host>-checkpoint-<size>.
type NATS struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	host string
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
}

// NewNATS connects to the server, reconnecting for ever when it goes away,
// and makes sure the stream exists.
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
	nc, err := nats.Connect(c.URL, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("nats sink: connecting to %s: %w", c.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: c.Stream, Subjects: []string{"sandtrail.>"},
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Duplicates: c.Duplicates})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats sink: stream %s: %w", c.Stream, err)
	}
	return &NATS{nc: nc, js: js, host: token(c.Host)}, nil
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

// MsgID is the Nats-Msg-Id of entry seq of host.
func MsgID(host string, seq uint64) string { return token(host) + "-" + strconv.FormatUint(seq, 10) }

// Write publishes the batch asynchronously and returns once the stream
// acknowledged every entry, or with the first error.
func (s *NATS) Write(ctx context.Context, batch []Entry) error {
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, e := range batch {
		msg := &nats.Msg{Subject: "sandtrail." + s.host + "." + token(e.Kind), Data: e.Line}
		id := MsgID(s.host, e.Seq)
		if e.Checkpoint != 0 {
			id = s.host + "-checkpoint-" + strconv.FormatUint(e.Checkpoint, 10)
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
