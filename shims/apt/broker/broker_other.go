//go:build !linux

package broker

import (
	"context"
	"errors"
	"net"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/shims"
)

// ErrNotSupported is returned off Linux, where peers have no SO_PEERCRED.
var ErrNotSupported = errors.New("broker: the apt broker needs linux")

// Config configures a Broker (see the Linux build).
type Config struct {
	AptGet, Mirror string
	Check          func(ctx context.Context, session string, reqs []shims.Request) (blocked bool, rule, message string)
	Emit           func(*event.Event)
	Attributor     *attribution.Attributor
	Nest           func(session string) (Cgroup, error)
	HookCmd        string
	Env            []string
	DpkgStatus     string
	Host           string
	Log            hclog.Logger
}

// Cgroup is a cgroup that apt-get is started in (see the Linux build).
type Cgroup interface {
	FD() int
	Close() error
}

// Broker is not supported here.
type Broker struct{}

// New returns ErrNotSupported.
func New(Config) (*Broker, error) { return nil, ErrNotSupported }

// Serve returns ErrNotSupported.
func (*Broker) Serve(*net.UnixListener) error { return ErrNotSupported }

// Close does nothing.
func (*Broker) Close() error { return nil }
