package fetch

import (
	"sort"
	"sync"
)

// FilterLog records the metadata the policy changed once per package and
// session, however often the client asks for it again.
type FilterLog struct {
	mu   sync.Mutex
	seen map[string]bool // session, ecosystem and package recorded
}

// maxSeen bounds the FilterLog's memory; past it, it starts again.
const maxSeen = 1 << 16

// Record passes f, its removals sorted by version, to env.Filter, unless
// it removed nothing or its session and package were recorded before.
func (l *FilterLog) Record(env *Env, f *Filtered) {
	if len(f.Removed) == 0 || env.Filter == nil {
		return
	}
	k := f.Client.SessionID + "\x00" + f.Ecosystem + "\x00" + f.Name
	l.mu.Lock()
	seen := l.seen[k]
	if !seen {
		if l.seen == nil || len(l.seen) >= maxSeen {
			l.seen = map[string]bool{}
		}
		l.seen[k] = true
	}
	l.mu.Unlock()
	if seen {
		return
	}
	sort.Slice(f.Removed, func(i, j int) bool { return f.Removed[i].Version < f.Removed[j].Version })
	env.Filter(f)
}
