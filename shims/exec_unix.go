//go:build unix

package shims

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// forwarded are the signals the shim passes on to the real manager. SIGINT
// and SIGQUIT come from the terminal to the whole foreground process
// group, the manager included: the shim catches and drops them (terminal),
// so that it outlives the manager to record what it did. It must not
// ignore them: an ignored signal stays ignored across exec, and Ctrl-C
// would no longer stop the manager; a caught one is reset to the default.
var (
	forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}
	terminal  = []os.Signal{syscall.SIGINT, syscall.SIGQUIT}
)

// ignoredAtStart are the signals of forwarded and terminal that the shim
// was started with ignored (SIGHUP under nohup, SIGINT in a background
// job), read before anything calls signal.Notify: Notify un-ignores a
// signal for the whole process, and signal.Ignored forgets that it was
// ignored once Notify has been called. The shim never catches these, so
// they stay ignored in the shim and in the manager it runs. Go's runtime
// keeps an inherited SIG_IGN only for SIGHUP and SIGINT; it resets the
// others (SIGQUIT, SIGTERM, SIGPIPE, ...) before the shim's code runs, so
// only those two can be found here.
var ignoredAtStart = ignored(append(append([]os.Signal(nil), forwarded...), terminal...))

// ignored returns the signals of sigs that are ignored now.
func ignored(sigs []os.Signal) map[os.Signal]bool {
	m := map[os.Signal]bool{}
	for _, sig := range sigs {
		if signal.Ignored(sig) {
			m[sig] = true
		}
	}
	return m
}

// notifyUnignored relays to c those of sigs that the shim was not started
// with ignored. It never calls signal.Notify with no signals, which would
// relay every signal.
func notifyUnignored(c chan<- os.Signal, sigs []os.Signal) {
	var caught []os.Signal
	for _, sig := range sigs {
		if !ignoredAtStart[sig] {
			caught = append(caught, sig)
		}
	}
	if len(caught) > 0 {
		signal.Notify(c, caught...)
	}
}

// status is how the real manager ended.
type status struct {
	code   int // its exit code, or -1 when a signal ended it
	signal syscall.Signal
}

// exit ends the shim as the manager ended: with its exit code, or by the
// same signal (raise). When the signal cannot end the shim, it exits
// 128+signal, as a shell would.
func (s status) exit() int {
	if s.code >= 0 {
		return s.code
	}
	raise(s.signal)
	return 128 + int(s.signal)
}

// runForwarding runs cmd, passing the forwarded signals on, and returns how
// it ended and its pid. A signal the shim was started with ignored is
// neither forwarded nor caught: it stays ignored, and cmd inherits it so.
func runForwarding(cmd *exec.Cmd) (status, int, error) {
	sigs, dropped := make(chan os.Signal, 8), make(chan os.Signal, 8)
	notifyUnignored(sigs, forwarded)
	notifyUnignored(dropped, terminal)
	defer signal.Stop(sigs)
	defer signal.Stop(dropped)
	if err := cmd.Start(); err != nil {
		return status{}, 0, err
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-dropped:
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	pid := cmd.Process.Pid
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return status{}, pid, err
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return status{code: -1, signal: ws.Signal()}, pid, nil
	}
	return status{code: cmd.ProcessState.ExitCode()}, pid, nil
}

// execve replaces the shim with the real manager.
func execve(path string, argv, env []string) error {
	return syscall.Exec(path, argv, env)
}
