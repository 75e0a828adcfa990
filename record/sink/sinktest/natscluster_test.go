package sinktest

import (
	"context"
	"errors"
	"fmt"
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
// with its Nats-Msg-Id, to an R3 file stream, SIGKILLs the stream's
// leader a third of the way through and restarts it at two thirds,
// retrying every publish that fails; the stream must hold each message
// exactly once, and the end of the test must leave no node running.
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

func publishThroughAKill(t *testing.T, c *NATSCluster) {
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
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
	const total = 1000
	killed, retries := -1, 0
	for i := range total {
		switch i {
		case total / 3:
			killed = streamLeader(t, ctx, stream)
			c.Kill(killed)
		case 2 * total / 3:
			c.Restart(killed)
		}
		retries += publishUntilAcked(t, ctx, js, i)
	}
	t.Logf("killed and restarted n%d, the stream's leader; %d publishes retried", killed+1, retries)
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != total || info.State.LastSeq != total {
		t.Errorf("the stream holds %d messages, last seq %d; want %d and %d", info.State.Msgs, info.State.LastSeq, total, total)
	}
	waitReplicasCurrent(t, ctx, stream)
}

// publishUntilAcked publishes message i until the stream acks it, and
// returns how many attempts failed.
func publishUntilAcked(t *testing.T, ctx context.Context, js jetstream.JetStream, i int) int {
	for failed := 0; ; failed++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, "events.test", []byte(strconv.Itoa(i)), jetstream.WithMsgID(fmt.Sprintf("msg-%d", i)))
		cancel()
		if err == nil {
			return failed
		}
		if ctx.Err() != nil {
			t.Fatalf("publishing message %d: %v (after %d attempts)", i, err, failed+1)
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
