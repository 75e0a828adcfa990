//go:build 386 || amd64 || arm64

package collector_test

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/record/event"
)

// The session manager watches a session's v2 cgroup; every process event of
// that cgroup then carries the session id.
func ExampleNew() {
	log := hclog.New(&hclog.LoggerOptions{Name: "sandtrail", Output: os.Stderr})
	c, err := collector.New(log, collector.WithOOMHandler(func(cgroupID uint64, pid int32, comm string) {
		log.Warn("oom kill", "cgroup_id", cgroupID, "pid", pid, "comm", comm)
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer c.Close()
	const cgroupID = 4242 // the inode number of the session's cgroup directory
	if err := c.Watch(cgroupID, "sess-42"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	for ev := range c.Events() {
		if ev.Kind == event.KindLoss {
			log.Warn("events lost", "count", ev.Loss.Count, "source", ev.Loss.Source, "lost_kind", ev.Loss.LostKind)
			continue
		}
		fmt.Println(ev.SessionID, ev.Kind, ev.Proc.Pid, ev.Proc.Argv)
	}
}
