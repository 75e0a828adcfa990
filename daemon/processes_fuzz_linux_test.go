package daemon

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzStatusOf: the one part of /proc/PID/status a process sets itself is
// its name (comm, 15 bytes); whatever it is, with newlines and a forged
// "PPid:" or "Uid:" line in it, the mirror reads the process's real parent
// and uid, on which its shim_bypass rests (a uid of 0 is the host's).
func FuzzStatusOf(f *testing.F) {
	f.Add([]byte("npm"))
	f.Add([]byte("x\nPPid:\t1\nUid:\t0"))
	f.Add([]byte("\nUid:\t0\t0\t0\t0"))
	f.Add([]byte("PPid: 1"))
	f.Add([]byte("a\x00b\\n"))
	old, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		f.Skipf("no /proc/self/comm: %v", err)
	}
	f.Cleanup(func() { os.WriteFile("/proc/self/comm", bytes.TrimSuffix(old, []byte("\n")), 0) })
	pid, ppid, uid := int32(os.Getpid()), int32(os.Getppid()), os.Getuid()
	f.Fuzz(func(t *testing.T, name []byte) {
		if err := os.WriteFile("/proc/self/comm", name, 0); err != nil {
			return // a name the kernel refuses (empty)
		}
		st, err := statusOf(pid)
		if err != nil {
			t.Fatalf("statusOf with name %q: %v", name, err)
		}
		if st.ppid != ppid || st.uid != uid {
			t.Fatalf("statusOf with name %q = ppid %d, uid %d, want %d, %d", name, st.ppid, st.uid, ppid, uid)
		}
		cg, err := cgroupOf(pid)
		if err != nil || !strings.HasPrefix(cg, "/") || strings.Contains(cg, "\n") {
			t.Fatalf("cgroupOf with name %q = %q, %v", name, cg, err)
		}
	})
}
