// Package central is the central store of many hosts' records: the
// tables of the SQLite index (record/index) in PostgreSQL, keyed by host
// as well as seq and partitioned by day, written by `sandtrail aggregate`
// from the hosts' JetStream stream, read by the same questions
// (index.Reader over index.Postgres) as a host's own index, and the
// verification of each host's Merkle chain against its signed
// checkpoints.
//
// Writing is idempotent on (host, seq): the entries table keeps each
// entry's leaf hash under that key, so an entry delivered twice (a
// redelivery, a publisher's retry, two aggregators) is stored once, and
// one delivered twice with different bytes is a fork. Its schema comes
// from the binary (migrations/), applied in order under an advisory lock
// so that aggregators started together migrate once.
//
// Trust model: the stream is not trusted. Anyone who may publish to it can
// name any host, seq and bytes. What the store trusts is each host's
// journal key (Keys): an entry counts as verified only once the entries
// 0..n-1 of its host hash, as RFC 6962 leaves, to the root of a checkpoint
// of size n signed by that host's key. The chain verification (Chains)
// raises an integrity alert, an alert event of the central store's own
// (host "", hid 0) naming the host and seq, for a host with no known key,
// a checkpoint with a bad signature or by another key, a fork of an entry
// or of a checkpoint, entries that do not hash to their signed checkpoint,
// and a gap that stays open past a grace period. Every problem is raised
// once (the integrity table).
package central
