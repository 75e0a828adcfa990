// Package proctest starts the servers that tests run as processes of
// their own (PostgreSQL, nats-server): each in a process group of its own,
// killed by the kernel if the test's process dies first (a test's timeout
// panics past every cleanup), and reaped by the goroutine that started
// it. Its callers stop a server by its pid, and by its group only while
// it has not been reaped, so that no other process is ever signalled.
package proctest

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd in a process group of its own, keeping the rest of its
// SysProcAttr, with the parent-death signal SIGKILL where the kernel has
// one (Linux). The parent-death signal follows the thread that forked, so
// cmd is started from a goroutine locked to its OS thread, which then
// waits for cmd and so lives as long as it. The channel is closed once cmd
// has been reaped.
func Start(cmd *exec.Cmd) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setParentDeathSignal(cmd.SysProcAttr)
	started := make(chan error)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// KillGroup sends SIGKILL to the process group of cmd, which Start
// started, unless exited (Start's channel) is closed, and waits for it to
// close. Until cmd is reaped its pid, and so its group, is still the one
// Start made.
func KillGroup(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
	default:
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}
