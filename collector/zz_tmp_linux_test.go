package collector

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

func TestTmpVerifierCost(t *testing.T) {
	for _, o := range []struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
	}{{"process", loadProcess}, {"file", loadFile}, {"net", loadNet}, {"unix", loadUnix}, {"rate", loadRate}, {"deny", loadDeny}} {
		spec, err := o.load()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range spec.Maps {
			if m.Type == ebpf.RingBuf {
				m.MaxEntries = 1 << 16
			}
			if m.Type == ebpf.PerCPUArray || m.Type == ebpf.Array {
				if m.MaxEntries == 0 {
					m.MaxEntries = 2
				}
			}
		}
		if ms, ok := spec.Maps["exec_scratch"]; ok {
			ms.MaxEntries = 2
		}
		if ms, ok := spec.Maps["file_scratch"]; ok {
			ms.MaxEntries = 2
		}
		t0 := time.Now()
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			t.Logf("%s: %v", o.name, err)
			continue
		}
		t.Logf("%s: %v", o.name, time.Since(t0))
		for n, p := range coll.Programs {
			info, _ := p.Info()
			vi, _ := info.VerifiedInstructions()
			t.Logf("  %s insns=%d verified=%d", n, len(spec.Programs[n].Instructions), vi)
		}
		coll.Close()
	}
}
