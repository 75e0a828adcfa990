package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// setup is what `ip -batch -` runs inside a new namespace. The addresses
// exist only inside it, as the source of what the tests send; ARP is off
// on the sink so that frames cross the pair at once and are dropped at
// its far end, which has no address and does not forward.
const setup = `link set lo up
link add ` + SinkLink + ` type veth peer name ` + SinkPeer + `
link set ` + SinkLink + ` arp off up
link set ` + SinkPeer + ` up
addr add 198.18.0.1/32 dev ` + SinkLink + `
addr add fdff:5a4e::1/128 dev ` + SinkLink + ` nodad
route add default dev ` + SinkLink + `
route add ::/0 dev ` + SinkLink + `
`

// NS is a network namespace made by New, held open by a file descriptor
// until the test ends.
type NS struct {
	fd int
}

// New makes a namespace for the test and closes it when the test ends. It
// skips the test without root, and fails it if the namespace cannot be
// made or set up.
func New(t testing.TB) *NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns: making a network namespace needs root")
	}
	n, err := create()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	t.Cleanup(func() { unix.Close(n.fd) })
	cmd := exec.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(setup)
	if err := n.Start(cmd); err != nil {
		t.Fatalf("netns: setting up the namespace: %v", err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Wait(); err != nil {
		t.Fatalf("netns: setting up the namespace: ip: %v\n%s", err, out.String())
	}
	if err := n.check(); err != nil {
		t.Fatalf("netns: the new namespace fails its own check: %v", err)
	}
	return n
}

// create makes an empty namespace on a thread of its own, which is
// discarded afterwards (it ends locked), so no thread of the process is
// left in the new namespace by accident.
func create() (*NS, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("opening the new namespace: %w", err)
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	return &NS{fd: r.fd}, nil
}

// Start starts cmd inside the namespace: it forks from a thread that
// entered the namespace, and that thread is discarded afterwards.
func (n *NS) Start(cmd *exec.Cmd) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("netns: entering the namespace: %w", err)
			return
		}
		ch <- cmd.Start()
	}()
	return <-ch
}

// Run runs cmd inside the namespace and waits for it.
func (n *NS) Run(cmd *exec.Cmd) error {
	if err := n.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// Output runs cmd inside the namespace and returns its standard output.
func (n *NS) Output(cmd *exec.Cmd) ([]byte, error) {
	var out strings.Builder
	cmd.Stdout = &out
	err := n.Run(cmd)
	return []byte(out.String()), err
}

// Do calls f on the calling goroutine, with its thread inside the
// namespace: the sockets f opens (a test's listeners, say) belong to the
// namespace for as long as they live, whichever thread uses them later.
// f may call t.Fatal. Do panics if the thread cannot return to its own
// namespace, leaving it locked so that it is discarded with the goroutine.
func (n *NS) Do(f func()) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		panic(fmt.Sprintf("netns: opening this thread's namespace: %v", err))
	}
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		panic(fmt.Sprintf("netns: entering the namespace: %v", err))
	}
	defer func() {
		err := unix.Setns(orig, unix.CLONE_NEWNET)
		unix.Close(orig)
		if err != nil {
			panic(fmt.Sprintf("netns: returning to this thread's namespace: %v", err))
		}
		runtime.UnlockOSThread()
	}()
	f()
}

// check is Check for the namespace n, from a thread inside it.
func (n *NS) check() (err error) {
	n.Do(func() { err = Check() })
	return err
}

// Check returns nil only when the calling thread is in a namespace that
// New made: its interfaces are lo and the sink pair, and both default
// routes lead into the sink. The tests' dialers call it before they send
// anything and refuse to run when it fails.
func Check() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("netns: listing interfaces: %w", err)
	}
	sink := false
	for _, ifc := range ifs {
		switch ifc.Name {
		case "lo", SinkPeer:
		case SinkLink:
			sink = true
		default:
			return fmt.Errorf("netns: interface %s is here: this is not a namespace that netns.New made, so this dialer must not send (see test/README.md)", ifc.Name)
		}
	}
	if !sink {
		return fmt.Errorf("netns: no %s here: this is not a namespace that netns.New made (see test/README.md)", SinkLink)
	}
	for _, r := range []struct{ file, what string }{
		{"/proc/thread-self/net/route", "IPv4"},
		{"/proc/thread-self/net/ipv6_route", "IPv6"},
	} {
		ok, err := defaultToSink(r.file)
		if err != nil {
			return fmt.Errorf("netns: reading the %s routes: %w", r.what, err)
		}
		if !ok {
			return fmt.Errorf("netns: the %s default route does not lead into %s", r.what, SinkLink)
		}
	}
	return nil
}

// defaultToSink reports whether the routing table in file (the format of
// /proc/net/route or /proc/net/ipv6_route) has a default route through
// the sink.
func defaultToSink(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		switch {
		case len(fl) >= 8 && fl[1] == "00000000" && fl[7] == "00000000": // Iface Destination Gateway Flags RefCnt Use Metric Mask
			if fl[0] == SinkLink {
				return true, nil
			}
		case len(fl) == 10 && fl[0] == strings.Repeat("0", 32) && fl[1] == "00": // dst dst_len src src_len next_hop metric refcnt use flags iface
			if fl[9] == SinkLink {
				return true, nil
			}
		}
	}
	return false, sc.Err()
}
