package netns

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// helperEnv makes the test binary run checkHelper instead of the tests.
const helperEnv = "SANDTRAIL_NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := Check(); err != nil {
			os.Stdout.WriteString(err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sinkPackets returns how many packets the far end of the sink has
// received, from /proc/thread-self/net/dev of a thread in n.
func sinkPackets(t *testing.T, n *NS) int {
	t.Helper()
	var b []byte
	var err error
	n.Do(func() { b, err = os.ReadFile("/proc/thread-self/net/dev") })
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name == SinkPeer {
			// bytes packets errs drop ...
			p, err := strconv.Atoi(strings.Fields(rest)[1])
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no %s in net/dev:\n%s", SinkPeer, b)
	return 0
}

// TestNamespace: a child started in the namespace passes Check, and the
// test process itself does not; what the namespace sends to foreign
// addresses, IPv4 and IPv6, TCP and UDP, ends up in the sink.
func TestNamespace(t *testing.T) {
	n := New(t)
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		return cmd
	}
	if out, err := n.Output(child()); err != nil {
		t.Errorf("Check in a child in the namespace: %v %s", err, out)
	}
	out, err := child().Output()
	if err == nil || !strings.Contains(string(out), "not a namespace that netns.New made") {
		t.Errorf("Check in a child outside the namespace: %v %q, want it refused", err, out)
	}
	if err := Check(); err == nil {
		t.Error("Check() in the test process = nil, want an error")
	}
	n.Do(func() {
		if err := Check(); err != nil {
			t.Errorf("Check() inside Do = %v", err)
		}
	})

	before := sinkPackets(t, n)
	sent := 0
	n.Do(func() {
		for _, dst := range []string{"198.51.100.7:53", "[2001:db8::7]:53"} {
			c, err := net.Dial("udp", dst)
			if err != nil {
				t.Fatalf("dial udp %s: %v", dst, err)
			}
			if _, err := c.Write([]byte("x")); err != nil {
				t.Errorf("send to %s: %v", dst, err)
			}
			c.Close()
			sent++
		}
	})
	if got := sinkPackets(t, n) - before; got < sent {
		t.Errorf("the sink received %d packets, want at least %d", got, sent)
	}
	// Loopback works inside.
	n.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("loopback in the namespace: %v", err)
		}
		c.Close()
		if ap := netip.MustParseAddrPort(ln.Addr().String()); !ap.Addr().IsLoopback() {
			t.Errorf("listener at %s", ap)
		}
	})
}
