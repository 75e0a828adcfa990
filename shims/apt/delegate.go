package apt

import (
	"errors"
	"os"

	"github.com/sandtrail/sandtrail/shims"
)

// brokered are the commands an unprivileged agent's apt runs through the
// daemon's broker; the broker refuses anything else it is sent.
var brokered = map[string]bool{"install": true, "reinstall": true, "update": true}

// Delegate runs an install (or `update`, which agents run first) that the
// agent cannot run itself, not being root, through the daemon's apt
// broker at SANDTRAIL_APT_SOCKET: the broker checks the policy, runs the
// real apt-get as root with the mirror configured, writes its output to
// the agent's own stdout and stderr, records each package, and returns
// apt's exit code. ok is false, and the shim runs apt here as usual, for
// root, for other commands and where no broker is configured.
func Delegate(args []string, c shims.Context) (exit int, ok bool, err error) {
	sock := c.Getenv("SANDTRAIL_APT_SOCKET")
	if os.Geteuid() == 0 || sock == "" || !brokered[ParseArgs(args).Command] {
		return 0, false, nil
	}
	code, err := Broker(sock, args, os.Stdin, os.Stdout, os.Stderr)
	var refused *RefusedError
	if errors.As(err, &refused) {
		return shims.ExitRefused, true, err
	}
	return code, true, err
}
