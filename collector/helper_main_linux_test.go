//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// helperEnv makes the test binary act as a helper process instead of running
// the tests.
const helperEnv = "SANDTRAIL_COLLECTOR_TEST_HELPER"

// helperModes are further helper modes, registered by test files' init
// functions: each gets the helper's arguments and returns its exit status.
var helperModes = map[string]func(args []string) int{}

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "exec-from-thread":
		// exec from a thread that is not the thread-group leader. A
		// goroutine that ends locked to the leader thread takes it out of
		// use, so the next one runs on another thread.
		runtime.LockOSThread()
		for range 10 {
			done := make(chan error)
			go func() {
				runtime.LockOSThread()
				if syscall.Gettid() == syscall.Getpid() {
					done <- nil
					return
				}
				done <- syscall.Exec("/bin/true", []string{"/bin/true", "from-thread"}, nil)
			}()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
		fmt.Fprintln(os.Stderr, "no goroutine ran on a thread other than the leader")
		os.Exit(3)
	case "new":
		// New without privileges: print the error and whether it is
		// ErrPermission.
		c, err := New(nil)
		if err == nil {
			c.Close()
		}
		fmt.Printf("%v\n%v\n", errors.Is(err, ErrPermission), err)
		os.Exit(0)
	default:
		if f, ok := helperModes[os.Getenv(helperEnv)]; ok {
			os.Exit(f(os.Args[1:]))
		}
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}
