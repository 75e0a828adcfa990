package index

import "github.com/sandtrail/sandtrail/record/journal"

// journalScan is the default ScanFunc.
var journalScan ScanFunc = journal.ScanAll

// leafHash is the Merkle leaf hash of an entry's canonical encoding.
var leafHash = journal.LeafHash
