package fetch

import (
	"slices"
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

// Record passes f, with a copy of its removals sorted by version, to
// env.Filter, unless it removed nothing or its session and package were
// recorded before. It does not change f.Removed, which the caller may
// share.
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
	g := *f
	g.Removed = slices.Clone(f.Removed)
	sort.Slice(g.Removed, func(i, j int) bool { return g.Removed[i].Version < g.Removed[j].Version })
	env.Filter(&g)
}
