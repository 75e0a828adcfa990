package fetch

import (
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Finish completes rec after an artifact request that began at start and
// ended with err, then records it. A failure the handler did not name
// (rec.Outcome still empty) is an upstream_error, or not_found for a 404,
// with the public message as its reason.
func (env *Env) Finish(rec *Record, start time.Time, err error) {
	rec.Latency = time.Since(start)
	if err != nil && rec.Outcome == "" {
		rec.Outcome = UpstreamError
		var e *Error
		if errors.As(err, &e) {
			rec.Reason = e.Public
			if e.Status == http.StatusNotFound {
				rec.Outcome = "not_found"
			}
		}
	}
	env.Record(rec)
}

// FilterOnce records the filtering of each package's metadata once per
// session (a client asks for the same metadata many times).
type FilterOnce struct {
	mu   sync.Mutex
	seen map[string]bool // session, ecosystem and name
}

// maxFilterSeen bounds FilterOnce's memory: past it, it starts afresh.
const maxFilterSeen = 1 << 16

// Record passes f, its removals sorted by version, to env.Filter unless f
// removes nothing or the same package was recorded for the same session
// before.
func (o *FilterOnce) Record(env *Env, f *Filtered) {
	if len(f.Removed) == 0 || env.Filter == nil {
		return
	}
	k := f.Client.SessionID + "\x00" + f.Ecosystem + "\x00" + f.Name
	o.mu.Lock()
	seen := o.seen[k]
	if !seen {
		if o.seen == nil || len(o.seen) >= maxFilterSeen {
			o.seen = map[string]bool{}
		}
		o.seen[k] = true
	}
	o.mu.Unlock()
	if seen {
		return
	}
	sort.SliceStable(f.Removed, func(i, j int) bool { return f.Removed[i].Version < f.Removed[j].Version })
	env.Filter(f)
}
