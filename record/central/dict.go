package central

import "strings"

// maxDict bounds each dictionary cache; past it the cache starts over.
const maxDict = 1 << 17

// dicts caches the ids of the dictionaries' keys. The ids come from the
// database and never change, so a cache is right whichever aggregator
// added a key; one is only forgotten when its transaction fails.
type dicts struct {
	sessions, paths, domains, packages map[string]int64
}

func newDicts() dicts {
	return dicts{map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}}
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
func text(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= maxKey {
		return s
	}
	n := maxKey
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// packageKey is a package's dictionary key.
func packageKey(eco, name, version string) string { return eco + "\x00" + name + "\x00" + version }
