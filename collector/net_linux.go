//go:build 386 || amd64 || arm64

package collector

import "github.com/cilium/ebpf"

// netCollector is the network part (bpf/net.c). Being built: until it is,
// it loads nothing.
type netCollector struct{}

func (n *netCollector) load(c *Collector, shared *ebpf.CollectionOptions) error { return nil }
func (n *netCollector) attach(c *Collector) error                               { return nil }
func (n *netCollector) programs() []progKind                                    { return nil }
func (n *netCollector) close()                                                  {}
