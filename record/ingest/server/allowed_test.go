package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestHostAuthoredKindsRefused: of every kind in event.Kinds, a peer may
// send only the pkg, tool and model ones, whether it is in a session or is
// root outside every session; the kinds that the host's own parts write
// (process.*, collector.loss, collector.capabilities, alert, ...) are
// refused before anything of the event is kept.
func TestHostAuthoredKindsRefused(t *testing.T) {
	s := &Server{host: "test-host"}
	peers := map[string]attribution{
		"session peer":           {pid: 42, uid: 1000, cgroupID: 7, session: "s-1"},
		"root outside a session": {pid: 43, uid: 0},
	}
	now := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	for name, a := range peers {
		for _, kind := range event.Kinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				e := &event.Event{V: event.SchemaVersion, TS: now, SessionID: "s-1", Kind: kind, Source: event.SourceKernel,
					Proc: &event.Proc{Pid: 1}, Pkg: &event.Pkg{Ecosystem: "npm", Name: "x"}, Tool: &event.Tool{Name: "bash"},
					Model: &event.Model{}, Loss: &event.Loss{Count: 1, Source: "forged"},
					Kernel: &event.Kernel{Release: "forged", Capabilities: []event.Capability{{Name: event.CapUnixEnforce, Have: true}}}}
				err := s.rewrite(e, 512, a, now)
				switch cat, _, _ := strings.Cut(kind, "."); cat {
				case "pkg", "tool", "model":
					if err != nil {
						t.Errorf("rewrite(%s) = %v, want nil", kind, err)
					}
					if e.Loss != nil || e.Kernel != nil {
						t.Errorf("rewrite(%s) kept another category's payload: loss %v, kernel %v", kind, e.Loss, e.Kernel)
					}
				default:
					if err == nil || !errors.Is(err, event.ErrInvalid) || !strings.Contains(err.Error(), "may not be sent by this peer") {
						t.Errorf("rewrite(%s) = %v, want it refused as not for this peer", kind, err)
					}
				}
			})
		}
	}
}
