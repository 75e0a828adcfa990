package npm

import (
	"fmt"
	"sync"
	"testing"
)

// TestRangeCacheConcurrent parses and tests the same and different ranges from many goroutines
// (run with -race), past the cache's size limit, and checks the answers stay right.
func TestRangeCacheConcurrent(t *testing.T) {
	v, err := ParseVersion("1.5.0", NPM)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < setCacheMax/2; i++ {
				lo := i % 3
				r, err := ParseRange(fmt.Sprintf(">=%d.0.0 <%d.%d.0", lo, 2+w, i), NPM)
				if err != nil {
					t.Error(err)
					return
				}
				if got, want := r.Test(v), lo <= 1; got != want {
					t.Errorf("ParseRange(>=%d.0.0 <%d.%d.0).Test(1.5.0) = %v, want %v", lo, 2+w, i, got, want)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}
