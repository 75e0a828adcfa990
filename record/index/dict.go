package index

// maxDict bounds a dictionary cache; past it the cache starts over, so a
// long-running follower holds at most this many keys of each kind.
const maxDict = 1 << 17

// dict caches the ids of one dictionary's keys. Keys added inside a
// transaction are pending until it commits, and forgotten if it does not.
type dict struct {
	ids, pending map[string]int64
}

func newDict() *dict { return &dict{ids: map[string]int64{}, pending: map[string]int64{}} }

func (d *dict) get(k string) (int64, bool) {
	if id, ok := d.ids[k]; ok {
		return id, true
	}
	id, ok := d.pending[k]
	return id, ok
}

func (d *dict) put(k string, id int64) { d.pending[k] = id }

func (d *dict) commit() {
	if len(d.ids)+len(d.pending) > maxDict {
		d.ids = map[string]int64{}
	}
	for k, id := range d.pending {
		d.ids[k] = id
	}
	clear(d.pending)
}

func (d *dict) rollback() { clear(d.pending) }

// forget drops a key whose row was deleted.
func (d *dict) forget(k string) { delete(d.ids, k) }
