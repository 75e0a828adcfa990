package attribution

import (
	"fmt"
	"testing"
)

// FuzzParseStartTime: a process names itself (its comm, which
// /proc/<pid>/stat shows in parentheses, may hold spaces and parentheses),
// so whatever its comm, the start time read back is the one the kernel
// wrote after it.
func FuzzParseStartTime(f *testing.F) {
	f.Add("sh", uint64(12345))
	f.Add("a) (b", uint64(1))
	f.Add(") 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 (", uint64(99))
	f.Add("", uint64(0))
	f.Fuzz(func(t *testing.T, comm string, start uint64) {
		stat := fmt.Sprintf("4242 (%s) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 %d 2478080 232 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n", comm, start)
		got, err := parseStartTime(4242, []byte(stat))
		if err != nil || got != start {
			t.Fatalf("parseStartTime(comm %q) = %d, %v, want %d", comm, got, err, start)
		}
	})
}
