package apt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrURIs is wrapped by every error in --print-uris output.
var ErrURIs = errors.New("apt: bad --print-uris output")

// URI is one line of `apt-get install --print-uris -qq -o
// Acquire::ForceHash=sha256`: 'URI' file size SHA256:hex.
type URI struct {
	URL  string `json:"url"`
	File string `json:"file"`
	Size int64  `json:"size"`
	// SHA256 is the hash in hex, lower case; empty when apt printed
	// another hash.
	SHA256 string `json:"sha256,omitempty"`
}

// PrintURIs parses --print-uris output. Lines that do not start with a
// quote (apt's other messages) are skipped; a quoted line that is not a
// URI line is an error.
func PrintURIs(output []byte) ([]URI, error) {
	var out []URI
	for _, line := range strings.Split(string(output), "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, "'") {
			continue
		}
		end := strings.Index(line[1:], "'")
		if end < 0 {
			return nil, fmt.Errorf("%w: unterminated URI in %q", ErrURIs, line)
		}
		u := URI{URL: line[1 : 1+end]}
		f := strings.Fields(line[2+end:])
		if u.URL == "" || len(f) < 2 {
			return nil, fmt.Errorf("%w: %q", ErrURIs, line)
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("%w: size in %q", ErrURIs, line)
		}
		u.File, u.Size = f[0], size
		if len(f) > 2 {
			if alg, hex, ok := strings.Cut(f[2], ":"); ok && strings.EqualFold(alg, "SHA256") && isHex(hex, 64) {
				u.SHA256 = strings.ToLower(hex)
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}
