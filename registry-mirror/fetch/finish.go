package fetch

import (
	"net/http"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// The rules of the mirror's own checks, named in the records of the
// artifacts they refused: the bytes did not match the publisher's digests
// (or size), or the registry's signature over them did not verify.
const (
	RuleDigest    = "mirror.digest"
	RuleSignature = "mirror.signature"
)

// Finish completes rec, the record of one artifact request that began at
// start and ended with err, and records it. A request that failed before
// an outcome was set (a refusal or a mismatch sets its own) is not_found
// for a 404 and upstream_error otherwise, with the public message as its
// reason. A refusal by the mirror's own checks (hash_mismatch,
// signature_invalid) is a block by RuleDigest or RuleSignature, whatever
// the policy said of the version before the bytes were checked: a
// cooldown flag on a version whose publish time is unknown does not
// describe a mismatch.
func (env *Env) Finish(rec *Record, start time.Time, err error) {
	if rec.recorded {
		return
	}
	rec.recorded = true
	rec.Latency = time.Since(start)
	rec.Failed(err)
	switch rec.Outcome {
	case HashMismatch:
		rec.refusedBy(RuleDigest)
	case SignatureInvalid:
		rec.refusedBy(RuleSignature)
	}
	env.Record(rec)
}

// ServeRecorded records rec, filled by ServedArtifact, as Finish does
// (Latency from rec.Start), and then serves the artifact's bytes: the
// mirror's record is emitted before the client has the bytes, so it
// precedes whatever the client does with them, in time and, with the
// host's ingest flushing its queue first, in the journal (a shim's claim
// of the package it installed from them). Recorded after serving, it came
// after the claim of a small package's quick install: an unverified
// install in the package view. The deb handler records before serving
// too. Finish after it records nothing more.
func (env *Env) ServeRecorded(w http.ResponseWriter, r *http.Request, rec *Record, art cache.Artifact, body *cache.Body, contentType string) {
	env.Finish(rec, rec.Start, nil)
	Serve(w, r, art, body, contentType)
}

// refusedBy makes rec a block by the mirror's check rule.
func (r *Record) refusedBy(rule string) {
	r.Verdict, r.Rule, r.Verified = "block", rule, false
}

// NotFound is the outcome of a request for an artifact the upstream does
// not have.
const NotFound = "not_found"
