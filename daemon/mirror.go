package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
)

// Mirror is a mirror serving on a listener of its own.
type Mirror struct {
	// URL is where it serves: http://ADDR.
	URL        string
	stop       context.CancelFunc
	done       chan error
	closeIntel func() error
}

// MirrorLinks ties a mirror to the daemon that serves it; each is optional
// (a standalone mirror has none).
type MirrorLinks struct {
	// Sessions attributes clients to sessions.
	Sessions mirror.Sessions
	// Processes names the process behind each client.
	Processes mirror.Processes
	// Dialed is told every upstream address the mirror connects to
	// (mirror.Config.Dialed).
	Dialed func(name string, addr netip.Addr)
}

// ServeMirror serves a mirror of cfg on listen, recording into emit, tied
// to its daemon by links. The caller Closes it.
func ServeMirror(cfg *Config, listen string, pol *policies.Engine, emit func(*event.Event), links MirrorLinks,
	log hclog.Logger) (*Mirror, error) {
	max := int64(0)
	if cfg.Mirror.CacheMax != "" {
		var err error
		if max, err = policies.ParseSize(cfg.Mirror.CacheMax); err != nil {
			return nil, fmt.Errorf("config: mirror.cache_max: %w", err)
		}
	}
	guarded, closeIntel, err := mirrorPolicy(cfg, pol)
	if err != nil {
		return nil, err
	}
	mc := mirror.Config{CacheDir: cfg.Mirror.CacheDir, CacheMax: max, Upstreams: cfg.Mirror.Upstreams, MetaTTL: cfg.Mirror.MetaTTL,
		Policy: guarded, Emit: emit, Sessions: links.Sessions, Processes: links.Processes, Dialed: links.Dialed, Host: cfg.Host, Log: log}
	m, err := mirror.New(mc)
	if err != nil {
		return nil, errors.Join(err, closeIntel())
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("mirror: %w", err), closeIntel())
	}
	ctx, cancel := context.WithCancel(context.Background())
	hm := &Mirror{URL: "http://" + ln.Addr().String(), stop: cancel, done: make(chan error, 1), closeIntel: closeIntel}
	go func() { hm.done <- m.Serve(ctx, ln, 10*time.Second) }()
	return hm, nil
}

// Done returns the channel the mirror's serving error arrives on.
func (m *Mirror) Done() <-chan error { return m.done }

// sessionEnv points a session's package managers at the mirror: every one
// the mirror serves (launch.MirrorEnv).
func (m *Mirror) sessionEnv() []string { return launch.MirrorEnv(m.URL) }

// Close stops the mirror, letting requests in flight finish.
func (m *Mirror) Close() error {
	m.stop()
	err := <-m.done
	m.done <- err // a second Close returns the same
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if m.closeIntel != nil {
		err = errors.Join(err, m.closeIntel())
		m.closeIntel = nil
	}
	return err
}
