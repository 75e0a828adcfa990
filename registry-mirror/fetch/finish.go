package fetch

import "time"

// Finish completes rec, the record of one artifact request that began at
// start and ended with err, and records it. A request that failed before
// an outcome was set (a refusal or a mismatch sets its own) is not_found
// for a 404 and upstream_error otherwise, with the public message as its
// reason.
func (env *Env) Finish(rec *Record, start time.Time, err error) {
	rec.Latency = time.Since(start)
	rec.Failed(err)
	env.Record(rec)
}

// NotFound is the outcome of a request for an artifact the upstream does
// not have.
const NotFound = "not_found"
