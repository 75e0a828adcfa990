package sinktest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSClusterDedupAcrossAKilledLeader publishes 1000 messages, each
// with its Nats-Msg-Id, to an R3 file stream, in batches of 50 in flight
// at once; it SIGKILLs the stream's leader a third of the way through,
// with a batch in flight, and restarts it at two thirds, publishing again
// every message whose ack did not come. The stream must hold each
// message exactly once, a message published again after the failover
// must be acked as a duplicate, and the end of the test must leave no
// node running.
func TestNATSClusterDedupAcrossAKilledLeader(t *testing.T) {
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		c := StartNATSCluster(t, 3)
		for _, n := range c.nodes {
			pids = append(pids, n.cmd.Process.Pid)
		}
		if got := strings.Count(c.URLs(), ",") + 1; got != 3 || !strings.Contains(c.URLs(), c.URL(2)) {
			t.Errorf("URLs() = %q, want the 3 nodes' URLs", c.URLs())
		}
		publishThroughAKill(t, c)
		for _, n := range c.nodes {
			if n.cmd != nil && !slices.Contains(pids, n.cmd.Process.Pid) {
				pids = append(pids, n.cmd.Process.Pid)
			}
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("after the test, kill(%d, 0) = %v, want ESRCH: a nats-server outlived it", pid, err)
		}
	}
}

const published = 1000

func publishThroughAKill(t *testing.T, c *NATSCluster) {
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "EVENTS", Subjects: []string{"events.>"}, Replicas: 3,
		Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 50
	killed, retried, dups := -1, 0, 0
	for first := 0; first < published; first += batch {
		kill := first <= published/3 && published/3 < first+batch
		if kill {
			killed = streamLeader(t, ctx, stream)
		}
		if first <= 2*published/3 && 2*published/3 < first+batch {
			c.Restart(killed)
		}
		unacked := publishBatch(t, js, first, batch, func() {
			if kill {
				c.Kill(killed)
			}
		})
		for _, i := range unacked {
			if publishUntilAcked(t, ctx, js, i).Duplicate {
				dups++
			}
		}
		retried += len(unacked)
	}
	t.Logf("killed and restarted n%d, the stream's leader; %d messages published again, %d of which the stream had already stored", killed+1, retried, dups)
	for _, i := range []int{0, published/3 - 1, published - 1} {
		if ack := publishUntilAcked(t, ctx, js, i); !ack.Duplicate {
			t.Errorf("message %d, published again after the failover, was acked as new (seq %d), want a duplicate", i, ack.Sequence)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != published || info.State.LastSeq != published {
		t.Errorf("the stream holds %d messages, last seq %d; want %d and %d", info.State.Msgs, info.State.LastSeq, published, published)
	}
	waitReplicasCurrent(t, ctx, stream)
}

// publish sends message i, with its Nats-Msg-Id, asynchronously.
func publish(js jetstream.JetStream, i int) (jetstream.PubAckFuture, error) {
	return js.PublishAsync("events.test", []byte(strconv.Itoa(i)), jetstream.WithMsgID(fmt.Sprintf("msg-%d", i)))
}

// publishBatch sends messages first..first+n-1 at once, calls inFlight,
// and returns those whose ack did not come.
func publishBatch(t *testing.T, js jetstream.JetStream, first, n int, inFlight func()) []int {
	futures := make(map[int]jetstream.PubAckFuture, n)
	var unacked []int
	for i := first; i < first+n && i < published; i++ {
		f, err := publish(js, i)
		if err != nil {
			unacked = append(unacked, i)
			continue
		}
		futures[i] = f
	}
	inFlight()
	for _, i := range slices.Sorted(maps.Keys(futures)) {
		select {
		case <-futures[i].Ok():
		case <-futures[i].Err():
			unacked = append(unacked, i)
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d: neither an ack nor an error within 10 s", i)
		}
	}
	return unacked
}

// publishUntilAcked publishes message i until the stream acks it, and
// returns the ack.
func publishUntilAcked(t *testing.T, ctx context.Context, js jetstream.JetStream, i int) *jetstream.PubAck {
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := js.Publish(pctx, "events.test", []byte(strconv.Itoa(i)), jetstream.WithMsgID(fmt.Sprintf("msg-%d", i)))
		cancel()
		if err == nil {
			return ack
		}
		if ctx.Err() != nil {
			t.Fatalf("publishing message %d: %v (after %d attempts)", i, err, attempt)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamLeader is the index of the node that leads stream.
func streamLeader(t *testing.T, ctx context.Context, stream jetstream.Stream) int {
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil {
		t.Fatal("the stream has no cluster information")
	}
	n, err := strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n"))
	if err != nil || n < 1 {
		t.Fatalf("the stream's leader is %q, want n1..n3", info.Cluster.Leader)
	}
	return n - 1
}

// waitReplicasCurrent waits until the stream's leader sees both other
// replicas current: the restarted node caught up.
func waitReplicasCurrent(t *testing.T, ctx context.Context, stream jetstream.Stream) {
	for {
		info, err := stream.Info(ctx)
		if err == nil && info.Cluster != nil && len(info.Cluster.Replicas) == 2 &&
			info.Cluster.Replicas[0].Current && info.Cluster.Replicas[1].Current {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream's replicas are not all current: %+v, %v", info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
