//go:build 386 || amd64 || arm64

package collector

import "github.com/cilium/ebpf"

// fileCollector is the file part (bpf/file.c). Being built: until it is,
// it loads nothing.
type fileCollector struct{}

func (f *fileCollector) load(c *Collector, shared *ebpf.CollectionOptions) error { return nil }
func (f *fileCollector) attach(c *Collector) error                               { return nil }
func (f *fileCollector) programs() []progKind                                    { return nil }
func (f *fileCollector) close()                                                  {}
