package central

import (
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
)

// maxDict bounds each dictionary cache; past it the cache starts over.
const maxDict = 1 << 17

// dicts caches the ids of the dictionaries' keys. The ids come from the
// database and never change, so a cache is right whichever aggregator
// added a key; one is only forgotten when its transaction fails.
type dicts struct {
	sessions, paths, domains, packages map[string]int64
	// owners is each session's host, by sid.
	owners map[int64]int32
}

func newDicts() dicts {
	return dicts{map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}, map[int64]int32{}}
}

// keep adds ids to cache m, starting it over when it would grow past
// maxDict.
func keep(m map[string]int64, ids map[string]int64) {
	if len(m)+len(ids) > maxDict {
		clear(m)
	}
	for k, id := range ids {
		m[k] = id
	}
}

// maxKey bounds a key the store indexes, in bytes: PostgreSQL's btree
// holds keys of up to about 2,700. A longer path (or name) is indexed by
// its first maxKey bytes, so that a prefix finds it; the event's JSON keeps
// it whole.
const maxKey = 2000

// text makes s storable as PostgreSQL text: no NUL (the kernel's paths
// have none; a forged event's may), at most maxKey bytes, cut at a rune.
// s is valid UTF-8, as encoding/json decodes it.
func text(s string) string { return storable(s, maxKey) }

// pathText makes a path storable whole: PostgreSQL's text holds no NUL.
func pathText(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

// storable returns s with each NUL replaced (pathText), cut to at most n
// bytes at a rune.
func storable(s string, n int) string { return event.Cut(pathText(s), n) }

// packageKey is a package's dictionary key: its three columns, which
// share one btree key, clipped so that together they fit in one.
func packageKeyOf(p *index.PackageKey) string {
	return storable(p.Ecosystem, 64) + "\x00" + storable(p.Name, maxKey/3) + "\x00" + storable(p.Version, maxKey/3)
}
