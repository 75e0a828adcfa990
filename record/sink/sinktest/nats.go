package sinktest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartNATS starts a real nats-server with JetStream on loopback, on port
// (0: a free one), storing in dir; the end of tb shuts it down.
func StartNATS(tb testing.TB, port int, dir string) *server.Server {
	tb.Helper()
	if port == 0 {
		port = freePort(tb)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	tb.Cleanup(s.Shutdown)
	return s
}
