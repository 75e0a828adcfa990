package pkgview

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// A digest is one hash of an artifact: its algorithm ("sha256") and its
// value in lower-case hex.
type digest struct {
	alg, hex string
}

// digestSizes are the algorithms artifacts are hashed with, by their
// digest size in bytes.
var digestSizes = map[string]int{"sha1": 20, "sha256": 32, "sha384": 48, "sha512": 64}

// digests parses a hash as the ecosystems write it: an SRI string of one or
// more "alg-<base64>" ("sha512-…", npm's), "alg:<hex>" (pip's, cargo's and
// apt's "sha256:…"), or bare hex, whose length says the algorithm. Case
// does not matter, nor do SRI options ("?…"). What it cannot read it
// leaves out.
func digests(h string) []digest {
	var out []digest
	for _, f := range strings.Fields(h) {
		if d, ok := parseDigest(f); ok {
			out = append(out, d)
		}
	}
	return out
}

func parseDigest(s string) (digest, bool) {
	if alg, v, ok := strings.Cut(s, ":"); ok {
		return hexDigest(strings.ToLower(alg), v)
	}
	if alg, v, ok := strings.Cut(s, "-"); ok {
		alg = strings.ToLower(alg)
		v, _, _ = strings.Cut(v, "?")
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) != digestSizes[alg] {
			return digest{}, false
		}
		return digest{alg, hex.EncodeToString(b)}, true
	}
	for alg, n := range digestSizes {
		if len(s) == 2*n {
			return hexDigest(alg, s)
		}
	}
	return digest{}, false
}

func hexDigest(alg, v string) (digest, bool) {
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != digestSizes[alg] {
		return digest{}, false
	}
	return digest{alg, hex.EncodeToString(b)}, true
}

// compareHashes says whether two hashes name the same artifact: same is
// set when they share an algorithm and every shared algorithm's values are
// equal; comparable is false when they share none (or one is empty), and
// nothing can be said.
func compareHashes(a, b string) (same, comparable bool) {
	da, db := digests(a), digests(b)
	same = true
	for _, x := range da {
		for _, y := range db {
			if x.alg != y.alg {
				continue
			}
			comparable = true
			if x.hex != y.hex {
				same = false
			}
		}
	}
	return same && comparable, comparable
}
