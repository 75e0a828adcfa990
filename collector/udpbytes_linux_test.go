//go:build 386 || amd64 || arm64

package collector

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

func init() { helperModes["udp-bytes"] = helperUDPBytes }

// The datagrams helperUDPBytes sends, by way.
var udpWays = []struct {
	name  string
	count int
	size  int
}{{"sendto", 3, 100}, {"write", 2, 200}, {"sendmmsg", 3, 150}}

// helperUDPBytes sends to the UDP server at args[0] from one socket per way
// of udpWays (unconnected sendto, write(2) on a connected socket, one
// sendmmsg of several datagrams on a connected socket), reads one reply on
// each, closes them, and prints "WAY PORT" for each, PORT its local port.
func helperUDPBytes(args []string) int {
	srv, err := net.ResolveUDPAddr("udp4", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, w := range udpWays {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		to := &unix.SockaddrInet4{Port: srv.Port}
		copy(to.Addr[:], srv.IP.To4())
		if w.name != "sendto" {
			if err := unix.Connect(fd, to); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		buf := make([]byte, w.size)
		switch w.name {
		case "sendto":
			for range w.count {
				if err := unix.Sendto(fd, buf, 0, to); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
		case "write":
			for range w.count {
				if _, err := unix.Write(fd, buf); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
		case "sendmmsg":
			iov := unix.Iovec{Base: &buf[0]}
			iov.SetLen(len(buf))
			msgs := make([]unix.Mmsghdr, w.count)
			for i := range msgs {
				msgs[i].Hdr.Iov = &iov
				msgs[i].Hdr.SetIovlen(1)
			}
			n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
			if errno != 0 || int(n) != w.count {
				fmt.Fprintln(os.Stderr, "sendmmsg:", n, errno)
				return 1
			}
		}
		reply := make([]byte, 1024)
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
		if _, _, err := unix.Recvfrom(fd, reply, 0); err != nil {
			fmt.Fprintln(os.Stderr, "reply:", err)
			return 1
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		unix.Close(fd)
		fmt.Println(w.name, sa.(*unix.SockaddrInet4).Port)
	}
	return 0
}

// TestUDPBytes: a UDP socket's payload each way is recorded as net.close at
// its release, whatever syscall sent it (sendto, write on a connected
// socket, sendmmsg).
func TestUDPBytes(t *testing.T) {
	requireKernel(t)
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const replySize = 50
	go func() {
		replied := map[string]bool{}
		buf := make([]byte, 2048)
		for {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if !replied[from.String()] {
				replied[from.String()] = true
				_, _ = srv.WriteToUDP(make([]byte, replySize), from)
			}
		}
	}()
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-udp"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy that nobody can run (the build directory is root's).
	dir, err := os.MkdirTemp("", "sandtrail-udp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := dir + "/helper"
	copyFile(t, self, helper)
	cmd := exec.Command(helper, srv.LocalAddr().String())
	cmd.Env = append(os.Environ(), helperEnv+"=udp-bytes")
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("udp helper: %v", err)
	}
	ports := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			p, _ := strconv.Atoi(f[1])
			ports[p] = f[0]
		}
	}
	time.Sleep(100 * time.Millisecond)
	evs := r.stop(t)
	got := map[string]*event.Net{}
	for _, ev := range inSession(evs, sid, event.KindNetClose) {
		if ev.Net.Proto == "udp" {
			if way, ok := ports[int(ev.Net.SrcPort)]; ok {
				got[way] = ev.Net
			}
		}
	}
	for _, w := range udpWays {
		n := got[w.name]
		if n == nil {
			t.Errorf("%s: no net.close of its UDP socket (ports %v, events %v)", w.name, ports, kinds(evs))
			continue
		}
		if want := uint64(w.count * w.size); n.BytesOut != want || n.BytesIn != replySize {
			t.Errorf("%s: bytes out/in = %d/%d, want %d/%d", w.name, n.BytesOut, n.BytesIn, want, replySize)
		}
		if n.SrcIP != "127.0.0.1" {
			t.Errorf("%s: src %s:%d, want 127.0.0.1", w.name, n.SrcIP, n.SrcPort)
		}
		if connected := w.name != "sendto"; connected && (n.DstIP != "127.0.0.1" || int(n.DstPort) != srv.LocalAddr().(*net.UDPAddr).Port) {
			t.Errorf("%s: dst %s:%d, want the server %s", w.name, n.DstIP, n.DstPort, srv.LocalAddr())
		}
	}
}
