package sinktest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sandtrail/sandtrail/record/internal/proctest"
)

// natsServerModule is the module whose nats-server the cluster runs: the
// version go.mod requires, which StartNATS runs in process.
const natsServerModule = "github.com/nats-io/nats-server/v2"

var natsServerBuild = &cachedBuild{what: "nats-server (" + natsServerModule + ")", build: buildNATSServer}

// buildNATSServer builds the nats-server command of the module's required
// version into the user's cache, once per version.
func buildNATSServer() (string, error) {
	src, err := collectorSource()
	if err != nil {
		return "", err
	}
	root := filepath.Join(src, "..", "..")
	out, err := exec.Command("go", "list", "-C", root, "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", natsServerModule, err)
	}
	version := strings.TrimSpace(string(out))
	if version == "" {
		return "", fmt.Errorf("sinktest: go.mod requires no version of %s (is it replaced?)", natsServerModule)
	}
	bin, err := cachePath("nats-server-" + version)
	if err != nil {
		return "", err
	}
	return bin, goBuild(bin, root, natsServerModule)
}

const (
	// natsReadyTimeout bounds a start; natsStopTimeout the wait after
	// SIGTERM before SIGKILL.
	natsReadyTimeout = 30 * time.Second
	natsStopTimeout  = 10 * time.Second
)

// NATSCluster is a JetStream cluster of nats-server processes that a test
// started on loopback, each in its own process group, with its own client
// and cluster ports and its own store directory, named n1..nN. Its
// methods are for the test's goroutine: Kill and Restart are not safe to
// call concurrently.
type NATSCluster struct {
	tb    testing.TB
	bin   string
	nodes []*natsNode
}

type natsNode struct {
	name              string
	dir               string // its config, store and logs
	port, clusterPort int
	runs              int
	cmd               *exec.Cmd
	exited            <-chan struct{} // closed once cmd is reaped
}

// natsNodeConfig: a node's name, client listener, store and cluster
// (name, listener and routes).
const natsNodeConfig = `server_name: %s
listen: 127.0.0.1:%d
jetstream {
  store_dir: %q
}
cluster {
  name: sandtrail-test
  listen: 127.0.0.1:%d
  routes: [%s]
}
`

// StartNATSCluster starts n nats-server processes, each routed to all the
// others, and waits, at most 30 s, until each takes connections and
// answers JetStream requests (the meta leader is elected). The binary is
// nats-server of the version go.mod requires, built once into the user's
// cache; a failed build fails tb under CI=true and skips it elsewhere.
// The end of tb stops the nodes still running.
func StartNATSCluster(tb testing.TB, n int) *NATSCluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("StartNATSCluster(%d): want at least one node", n)
	}
	c := &NATSCluster{tb: tb, bin: natsServerBuild.binary(tb)}
	dir := tb.TempDir()
	for i := range n {
		name := "n" + strconv.Itoa(i+1)
		c.nodes = append(c.nodes, &natsNode{name: name, dir: filepath.Join(dir, name), port: freePort(tb), clusterPort: freePort(tb)})
	}
	tb.Cleanup(c.Stop)
	for _, node := range c.nodes {
		if err := c.writeConfig(node); err != nil {
			tb.Fatal(err)
		}
	}
	t0 := time.Now()
	for _, node := range c.nodes {
		c.start(node)
	}
	deadline := time.Now().Add(natsReadyTimeout)
	for _, node := range c.nodes {
		c.waitReady(node, deadline)
	}
	tb.Logf("nats cluster of %d ready in %s", n, time.Since(t0).Round(time.Millisecond))
	return c
}

func (c *NATSCluster) writeConfig(node *natsNode) error {
	var routes []string
	for _, o := range c.nodes {
		if o != node {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.clusterPort))
		}
	}
	if err := os.MkdirAll(filepath.Join(node.dir, "store"), 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf(natsNodeConfig, node.name, node.port, filepath.Join(node.dir, "store"), node.clusterPort, strings.Join(routes, ", "))
	return os.WriteFile(filepath.Join(node.dir, "nats.conf"), []byte(cfg), 0o600)
}

func (n *natsNode) logFile() string {
	return filepath.Join(n.dir, fmt.Sprintf("nats-%d.log", n.runs))
}

// start starts node's process (its next run, with a log of its own) in
// its own process group.
func (c *NATSCluster) start(node *natsNode) {
	c.tb.Helper()
	node.runs++
	log, err := os.Create(node.logFile())
	if err != nil {
		c.tb.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(c.bin, "-c", filepath.Join(node.dir, "nats.conf"))
	cmd.Stdout, cmd.Stderr = log, log
	exited, err := proctest.Start(cmd)
	if err != nil {
		c.tb.Fatalf("starting %s: %v", node.name, err)
	}
	node.cmd, node.exited = cmd, exited
}

// waitReady waits until node answers a JetStream request, it exits, or
// deadline passes.
func (c *NATSCluster) waitReady(node *natsNode, deadline time.Time) {
	c.tb.Helper()
	var err error
	for {
		if err = jetStreamAnswers(node.url()); err == nil {
			return
		}
		select {
		case <-node.exited:
			c.tb.Fatalf("nats-server %s exited (%v) before it was ready\n%s", node.name, node.cmd.ProcessState, logTail(node.logFile()))
		default:
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("nats-server %s was not ready within %s: %v\n%s", node.name, natsReadyTimeout, err, logTail(node.logFile()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jetStreamAnswers connects to url alone and asks JetStream for the
// account's information, which only a cluster with a meta leader gives.
func jetStreamAnswers(url string) error {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), time.Second)
	if err != nil {
		return err
	}
	conn.Close()
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// logTail is the end of a log file, for a failure's message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func (n *natsNode) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// URLs is the comma-separated list of every node's client URL, for
// nats.Connect.
func (c *NATSCluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = n.url()
	}
	return strings.Join(urls, ",")
}

// URL is node i's client URL (i from 0; the node named n<i+1>).
func (c *NATSCluster) URL(i int) string { return c.nodes[i].url() }

// Kill sends SIGKILL to node i's pid and reaps it.
func (c *NATSCluster) Kill(i int) {
	node := c.nodes[i]
	if node.cmd == nil {
		return
	}
	node.cmd.Process.Kill()
	<-node.exited
	node.cmd = nil
}

// Restart starts node i again, with its config and store, after Kill, and
// waits, at most 30 s, until it answers JetStream requests.
func (c *NATSCluster) Restart(i int) {
	c.tb.Helper()
	node := c.nodes[i]
	if node.cmd != nil {
		c.tb.Fatalf("Restart(%d): %s is running", i, node.name)
	}
	c.start(node)
	c.waitReady(node, time.Now().Add(natsReadyTimeout))
}

// Stop sends SIGTERM to each node still running, by the pid it started,
// and SIGKILL to the process group of any still there 10 s later; it
// reaps them all. It runs at the end of the test.
func (c *NATSCluster) Stop() {
	var running []*natsNode
	for _, node := range c.nodes {
		if node.cmd != nil {
			node.cmd.Process.Signal(syscall.SIGTERM)
			running = append(running, node)
		}
	}
	deadline := time.NewTimer(natsStopTimeout)
	defer deadline.Stop()
	expired := false
	for _, node := range running {
		if !expired {
			select {
			case <-node.exited:
			case <-deadline.C:
				expired = true
			}
		}
		proctest.KillGroup(node.cmd, node.exited)
		node.cmd = nil
	}
}

// JetStream connects to url (a server, or several, comma-separated) for
// the test, which closes the connection when it ends.
func JetStream(tb testing.TB, url string) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
