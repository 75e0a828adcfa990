//go:build unix

package apt

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"syscall"
)

// RefusedError is returned by Broker when the broker refused the request.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "apt broker refused: " + e.Message }

// Broker asks the apt broker listening on socket to run apt-get args as
// root, passing stdin, stdout and stderr so that apt's output reaches
// them unchanged. It returns apt-get's exit code; a refusal is exit 100
// with a *RefusedError. If this process dies, the broker sees the
// connection close and kills apt-get.
func Broker(socket string, args []string, stdin, stdout, stderr *os.File) (int, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return 100, fmt.Errorf("connecting to the apt broker: %w", err)
	}
	defer c.Close()
	req, err := json.Marshal(BrokerRequest{Args: args, Term: os.Getenv("TERM"), Lang: os.Getenv("LANG")})
	if err != nil {
		return 100, fmt.Errorf("encoding the broker request: %w", err)
	}
	if len(req) > MaxBrokerFrame {
		return 100, fmt.Errorf("%w: the request is %d bytes", ErrFrame, len(req))
	}
	frame := append([]byte{byte(len(req) >> 24), byte(len(req) >> 16), byte(len(req) >> 8), byte(len(req))}, req...)
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	n, _, err := c.WriteMsgUnix(frame, rights, nil)
	if err != nil {
		return 100, fmt.Errorf("sending the broker request: %w", err)
	}
	if n < len(frame) {
		if _, err := c.Write(frame[n:]); err != nil {
			return 100, fmt.Errorf("sending the broker request: %w", err)
		}
	}
	b, err := ReadFrame(c)
	if err != nil {
		return 100, fmt.Errorf("reading the broker's reply: %w", err)
	}
	var rep BrokerReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return 100, fmt.Errorf("decoding the broker's reply: %w", err)
	}
	if rep.Refused {
		return 100, &RefusedError{Message: rep.Message}
	}
	return rep.Exit, nil
}
