// Package fetchtest builds what an ecosystem handler's tests need: a
// policy engine from YAML, and an Env over a fresh cache whose records
// are kept for the test to read. It trusts its tests; it is not for use
// outside them.
package fetchtest

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	policy "github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// Policy compiles a policy written in YAML.
func Policy(t testing.TB, yaml string) *policy.Engine {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// Records keeps what an Env recorded.
type Records struct {
	mu       sync.Mutex
	records  []*fetch.Record
	filtered []*fetch.Filtered
}

// Env returns an Env with the policy yaml, a cache in a temporary
// directory, a one-minute metadata TTL, 1 MiB bounds on artifacts and
// metadata, and its records kept.
func Env(t testing.TB, yaml string) (*fetch.Env, *Records) {
	t.Helper()
	c, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Records{}
	env := &fetch.Env{Cache: c, Policy: Policy(t, yaml), Log: hclog.NewNullLogger(), MetaTTL: time.Minute, MaxArtifact: 1 << 20,
		Now: time.Now, Upstream: &fetch.Upstream{HTTP: http.DefaultClient, MaxMeta: 1 << 20},
		Record: func(rec *fetch.Record) { r.mu.Lock(); r.records = append(r.records, rec); r.mu.Unlock() },
		Filter: func(f *fetch.Filtered) { r.mu.Lock(); r.filtered = append(r.filtered, f); r.mu.Unlock() }}
	return env, r
}

// All returns the artifact records so far.
func (r *Records) All() []*fetch.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*fetch.Record(nil), r.records...)
}

// Last returns the last artifact record, or an empty one.
func (r *Records) Last() *fetch.Record {
	all := r.All()
	if len(all) == 0 {
		return &fetch.Record{}
	}
	return all[len(all)-1]
}

// Filtered returns the filtering records so far.
func (r *Records) Filtered() []*fetch.Filtered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*fetch.Filtered(nil), r.filtered...)
}
