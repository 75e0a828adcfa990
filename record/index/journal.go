package index

import "github.com/sandtrail/sandtrail/record/journal"

// journalScan is the default ScanFunc.
var journalScan ScanFunc = journal.Scan
