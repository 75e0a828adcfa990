//go:build 386 || amd64 || arm64

package collector

import (
	"testing"
)

func TestNetLoads(t *testing.T) {
	requireKernel(t)
	r := startRecorder(t, false)
	r.stop(t)
}
