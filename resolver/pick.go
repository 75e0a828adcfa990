package resolver

import "fmt"

// LatestTag is the tag that an OCI client pulls when none is given.
const LatestTag = "latest"

// Pick returns the candidate that the ecosystem's client would install for spec, where an empty
// spec means any version. tags are the registry's tags (npm's dist-tags; nil elsewhere).
//
//   - npm picks as npm-pick-manifest does (npm.BestWithTags): a dist-tag named by the spec, else
//     the "latest" tag when it satisfies the range, else the highest match. An empty spec is "*".
//   - OCI picks the tag equal to spec; an empty spec is the tag "latest", as docker pull reads
//     it.
//   - The others pick as [Best] does, and for an empty spec the highest candidate that parses.
//
// The candidate is returned exactly as given. Pick returns an error wrapping ErrNoMatch when
// nothing fits, and an error if the ecosystem is unknown or the spec does not parse.
func Pick(ecosystem, spec string, candidates []string, tags map[string]string) (string, error) {
	e, err := Lookup(ecosystem)
	if err != nil {
		return "", err
	}
	if tp, ok := e.grammar.(tagPicker); ok {
		return tp.pickTagged(spec, candidates, tags)
	}
	switch {
	case !e.HasRanges():
		return pickTag(spec, candidates)
	case spec == "":
		return e.highest(candidates)
	}
	return Best(ecosystem, spec, candidates)
}

// pickTag returns the candidate equal to tag, or "latest" for an empty tag.
func pickTag(tag string, candidates []string) (string, error) {
	if tag == "" {
		tag = LatestTag
	}
	for _, c := range candidates {
		if c == tag {
			return c, nil
		}
	}
	return "", fmt.Errorf("choosing tag %q among %d candidates: %w", tag, len(candidates), ErrNoMatch)
}

// highest returns the highest of the candidates that parse (the first of equal ones).
func (e *Ecosystem) highest(candidates []string) (string, error) {
	best, bestV := -1, Version(nil)
	for i, c := range candidates {
		v, err := e.ParseVersion(c)
		if err != nil {
			continue
		}
		if best < 0 || v.Compare(bestV) > 0 {
			best, bestV = i, v
		}
	}
	if best < 0 {
		return "", fmt.Errorf("choosing the highest %s version among %d candidates: %w", e.info.Name, len(candidates), ErrNoMatch)
	}
	return candidates[best], nil
}
