package event_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// BenchmarkUnmarshal compares Unmarshal (size cap, unknown fields and
// trailing data refused, Validate) with a bare json.Unmarshal of the same
// bytes, interleaved in batches so that both see the same machine load. It
// reports the fastest batch of each and the ratio (x-json: how many times
// slower than the bare decode Unmarshal is).
func BenchmarkUnmarshal(b *testing.B) {
	const batch = 20
	for _, kind := range []string{"process.exec", "pkg.fetch", "net.dns"} {
		raw, err := event.Marshal(examples()[kind])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(kind, func(b *testing.B) {
			minEvent, minJSON := time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				t0 := time.Now()
				for range batch {
					if _, err := event.Unmarshal(raw); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for range batch {
					var e event.Event
					if err := json.Unmarshal(raw, &e); err != nil {
						b.Fatal(err)
					}
				}
				minEvent = min(minEvent, t1.Sub(t0))
				minJSON = min(minJSON, time.Since(t1))
			}
			b.ReportMetric(float64(minEvent)/float64(minJSON), "x-json")
			b.ReportMetric(float64(minEvent.Nanoseconds())/batch, "unmarshal-ns/op")
			b.ReportMetric(float64(minJSON.Nanoseconds())/batch, "json-ns/op")
		})
	}
}

func BenchmarkMarshal(b *testing.B) {
	e := examples()["process.exec"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := event.Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}
