package cache

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// Group coalesces concurrent calls for one key: while a call for a key is
// running, later calls for it wait for its result instead of running
// again. Each upstream artifact is therefore fetched once however many
// clients ask for it at the same time.
type Group[T any] struct {
	mu    sync.Mutex
	calls map[string]*call[T]
}

type call[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int
}

// Do runs fn for key unless a call for key is running, in which case it
// waits for that call. shared reports whether the result came from another
// caller's call.
func (g *Group[T]) Do(key string, fn func() (T, error)) (v T, err error, shared bool) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*call[T]{}
	}
	if c, ok := g.calls[key]; ok {
		c.waiters++
		g.mu.Unlock()
		<-c.done
		return c.val, c.err, true
	}
	c := &call[T]{done: make(chan struct{}), err: errAbandoned}
	g.calls[key] = c
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn()
	return c.val, c.err, false
}

// waiting returns how many callers wait for the running call for key.
func (g *Group[T]) waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[key]; ok {
		return c.waiters
	}
	return 0
}

// errAbandoned is what waiters get when the call they waited for panicked.
var errAbandoned = errors.New("cache: the fill this request waited for failed")

// sortByTime sorts s oldest first.
func sortByTime[E any](s []E, at func(E) time.Time) {
	sort.SliceStable(s, func(i, j int) bool { return at(s[i]).Before(at(s[j])) })
}
