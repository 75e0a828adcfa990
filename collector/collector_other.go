//go:build !linux || !(386 || amd64 || arm64)

package collector

import (
	"context"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
)

// Collector is not available on this system; New returns ErrNotSupported.
type Collector struct{}

// New returns ErrNotSupported: the collector needs Linux on amd64 or arm64.
func New(log hclog.Logger, opts ...Option) (*Collector, error) {
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	return nil, ErrNotSupported
}

// Probe returns ErrNotSupported.
func Probe() (*event.Kernel, error) { return nil, ErrNotSupported }

// Kernel returns nil.
func (c *Collector) Kernel() *event.Kernel { return nil }

// Watch returns ErrNotSupported.
func (c *Collector) Watch(cgroupID uint64, sessionID string) error { return ErrNotSupported }

// Sync returns ErrNotSupported.
func (c *Collector) Sync(ctx context.Context) (uint64, error) { return 0, ErrNotSupported }

// Unwatch returns ErrNotSupported.
func (c *Collector) Unwatch(cgroupID uint64) error { return ErrNotSupported }

// DenyUserNamespaces returns ErrNotSupported.
func (c *Collector) DenyUserNamespaces(cgroupID uint64) error { return ErrNotSupported }

// LearnDomain returns ErrNotSupported.
func (c *Collector) LearnDomain(ip netip.Addr, domain string, ttl time.Duration) error {
	return ErrNotSupported
}

// RedirectDNS returns ErrNotSupported.
func (c *Collector) RedirectDNS(cgroupID uint64, v4, v6 netip.AddrPort) error {
	return ErrNotSupported
}

// DNSSender finds no sender.
func (c *Collector) DNSSender(cookie uint64) (p event.Proc, ok bool) { return event.Proc{}, false }

// ConnSender finds no process.
func (c *Collector) ConnSender(cookie uint64) (p event.Proc, session string, ok bool) {
	return event.Proc{}, "", false
}

// SetNetRate returns ErrNotSupported.
func (c *Collector) SetNetRate(cgroupID uint64, bytesPerSec int64, warn bool) error {
	return ErrNotSupported
}

// AddSensitive returns ErrNotSupported.
func (c *Collector) AddSensitive(cgroupID uint64, prefixes, exceptions []string) error {
	return ErrNotSupported
}

// Events returns a closed channel.
func (c *Collector) Events() <-chan *event.Event {
	ch := make(chan *event.Event)
	close(ch)
	return ch
}

// Stats returns zero counters.
func (c *Collector) Stats() Stats { return Stats{} }

// Close does nothing.
func (c *Collector) Close() error { return nil }
