package main

// The exit codes of every command: one table, which docs/operations.md
// documents. A code means the same in every command that uses it; run
// exits with its CMD's own status instead.
const (
	exitOK        = 0 // done: verified, proven, valid, runs here
	exitFailed    = 1 // usage error, or something could not be read or done
	exitTampered  = 2 // the record or the cache is not what was signed or locked
	exitUncovered = 3 // verify: nothing is bad, but entries follow the newest checkpoint
	exitInvalid   = 4 // policy check: the file was read and is invalid
	exitCannotRun = 5 // doctor: a capability that is required is missing here
	exitFound     = 6 // hunt: a session matches a known-malicious package record
	exitNoMatch   = 7 // rules test: no event matched
	exitAlerted   = 8 // report --fail-on: the session has an alert at the level or above
)

// usageErr wraps err with the usage/IO exit code.
func usageErr(err error) error { return &exitError{code: exitFailed, err: err} }
