package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// helperEnv makes the test binary act as a small workload instead of
// running tests (see runHelper).
const helperEnv = "SANDTRAIL_E2E_HELPER"

// helperCmd is the command line that runs the helper in mode, through
// env(1) because a session's command gets run's environment.
func helperCmd(mode string, args ...string) []string {
	return append([]string{"/usr/bin/env", helperEnv + "=" + mode, helper}, args...)
}

// runHelper runs the workload mode names, from helpers, inside a session.
func runHelper(mode string, args []string) int {
	if h, ok := helpers[mode]; ok {
		return h(args)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// helpers are the workloads that sessions run (helperCmd), by mode: every
// mode, in one table, each with the file its function lives in. A new
// workload is a function in its test's file and a line here.
var helpers = map[string]func(args []string) int{
	// This file's: the limits' workloads of TestRunLimits, and
	// TestDaemonSessions' counter (run_linux_test.go).
	"alloc":    allocHelper,
	"busy":     busyHelper,
	"counter":  counterHelper,
	"forkloop": forkloopHelper,
	"disk":     diskHelper,

	"storm":      helperStorm,      // loss_linux_test.go
	"diskfill":   diskFillHelper,   // diskquota_linux_test.go
	"dnsquery":   dnsQueryHelper,   // dns_linux_test.go
	"connect":    connectHelper,    // dns_linux_test.go
	"waitfile":   waitFileHelper,   // dns_linux_test.go, ingest_cap_linux_test.go
	"egressdial": egressDialHelper, // egress_linux_test.go

	"execidentity": execIdentityHelper, // exec_identity_linux_test.go
	"execself":     execSelfHelper,     // exec_identity_linux_test.go
	"execfd":       execFdHelper,       // exec_identity_linux_test.go

	"memfdexec": memfdExecHelper, // detections_linux_test.go
	"gainroot":  gainRootHelper,  // detections_linux_test.go
	"rootexec":  rootExecHelper,  // detections_linux_test.go

	"ptrace":     ptraceHelper,     // file_events_linux_test.go
	"files":      helperFiles,      // files_linux_test.go
	"holdconns":  holdConnsHelper,  // ingest_cap_linux_test.go
	"forgefetch": forgeFetchHelper, // ingest_forged_linux_test.go
	"intrude":    intrudeHelper,    // isolation_linux_test.go
	"netget":     netGetHelper,     // net_linux_test.go
	"netdial":    netDialHelper,    // net_linux_test.go
	"timedget":   timedGetHelper,   // netrate_linux_test.go
	"tcpsend":    tcpSendHelper,    // netrate_linux_test.go
	"seccomp":    seccompHelper,    // seccomp_linux_test.go
	"unixdial":   unixDialHelper,   // unix_sockets_linux_test.go
	"rawsock":    rawSockHelper,    // unix_sockets_linux_test.go
}

// allocHelper MiB: allocate and touch MiB mebibytes, then hold them.
func allocHelper(args []string) int {
	n, _ := strconv.Atoi(args[0])
	var keep [][]byte
	for range n {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	time.Sleep(time.Second)
	return len(keep) & 0
}

// busyHelper: spin until the cgroup's cpu.stat shows throttling.
func busyHelper([]string) int {
	x := 0
	for !throttled() {
		for i := range 1 << 20 {
			x += i
		}
	}
	return x & 0
}

// counterHelper FILE: write an increasing count every 10 ms.
func counterHelper(args []string) int {
	for i := 1; ; i++ {
		_ = os.WriteFile(args[0]+".tmp", []byte(strconv.Itoa(i)), 0o644)
		_ = os.Rename(args[0]+".tmp", args[0])
		time.Sleep(10 * time.Millisecond)
	}
}

// forkloopHelper N: start N sleeping children, ignoring failures.
func forkloopHelper(args []string) int {
	n, _ := strconv.Atoi(args[0])
	var cmds []*exec.Cmd
	fails := 0
	for range n {
		c := exec.Command("/bin/sleep", "3")
		if err := c.Start(); err != nil {
			fails++
			continue
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		_ = c.Wait()
	}
	fmt.Printf("started %d, failed %d\n", len(cmds), fails)
	return 0
}

// diskHelper MiB: write MiB mebibytes into the workdir, then wait.
func diskHelper(args []string) int {
	n, _ := strconv.Atoi(args[0])
	f, err := os.Create("fill")
	if err != nil {
		return 2
	}
	buf := bytes.Repeat([]byte{'x'}, 1<<20)
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 3
		}
	}
	f.Sync()
	time.Sleep(30 * time.Second)
	return 0
}

// throttled reports whether cpu.stat of this process's cpu cgroup (v1
// or v2) counts throttled time.
func throttled() bool {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dirs []string
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "cpu"):
			dirs = []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}
		case parts[0] == "0":
			dirs = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		}
		for _, d := range dirs {
			st, err := os.ReadFile(filepath.Join(d, parts[2], "cpu.stat"))
			if err != nil {
				continue
			}
			// The throttled time, which the session reports, not
			// nr_throttled: the kernel adds a period's throttled time
			// only when the period ends, so a process that stops at the
			// first throttle can end before any time was counted.
			for _, l := range strings.Split(string(st), "\n") {
				for _, key := range []string{"throttled_time ", "throttled_usec "} {
					if v, ok := strings.CutPrefix(l, key); ok && v != "0" {
						return true
					}
				}
			}
		}
	}
	return false
}

// helperPid returns the pid of the session's helper process in mode.
func helperPid(t *testing.T, evs []*event.Event, mode string) int32 {
	t.Helper()
	for _, ev := range kinds(evs, "process.exec") {
		if ev.Proc.Exe == helper || (len(ev.Proc.Argv) > 0 && ev.Proc.Argv[0] == helper) {
			return ev.Proc.Pid
		}
	}
	t.Fatalf("no exec of the %s helper among %d events", mode, len(evs))
	return 0
}

func errnoName(en syscall.Errno) string {
	switch en {
	case syscall.EPERM:
		return "EPERM"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	}
	return en.Error()
}
