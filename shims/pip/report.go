package pip

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// item is one entry of a pip installation report's install list.
type item struct {
	Metadata struct {
		Name         string   `json:"name"`
		Version      string   `json:"version"`
		RequiresDist []string `json:"requires_dist"`
	} `json:"metadata"`
	DownloadInfo struct {
		URL         string `json:"url"`
		ArchiveInfo *struct {
			Hash   string            `json:"hash"`
			Hashes map[string]string `json:"hashes"`
		} `json:"archive_info"`
	} `json:"download_info"`
	Requested bool `json:"requested"`
	IsDirect  bool `json:"is_direct"`
}

// ParseReport reads a pip installation report (pip 23's --report) into
// the Packages it installs. reqs are the invocation's requests: a
// requested package's Requested is the spec (or source) of the request
// that names it (PEP 503 names), and a transitive one's RequestedBy is
// the nearest requested package that depends on it through
// requires_dist, else the nearest that does.
func ParseReport(b []byte, reqs []shims.Request) ([]shims.Package, error) {
	var rep struct {
		Install []item `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("parsing the pip report: %w", err)
	}
	parents := dependents(rep.Install)
	var out []shims.Package
	for i, it := range rep.Install {
		pk := shims.Package{Name: it.Metadata.Name, Version: it.Metadata.Version, SourceURL: it.DownloadInfo.URL,
			Hash: hashOf(it), Direct: it.Requested}
		if it.Requested {
			pk.Requested = requestedSpec(it, reqs)
		} else {
			pk.RequestedBy = requestedBy(i, rep.Install, parents)
		}
		out = append(out, pk)
	}
	return out, nil
}

// hashOf is an item's archive hash as "sha256:<hex>" (or another
// algorithm's name and hex).
func hashOf(it item) string {
	ai := it.DownloadInfo.ArchiveInfo
	if ai == nil {
		return ""
	}
	if h := ai.Hashes["sha256"]; h != "" {
		return "sha256:" + strings.ToLower(h)
	}
	if alg, hex, ok := strings.Cut(ai.Hash, "="); ok {
		return strings.ToLower(alg) + ":" + strings.ToLower(hex)
	}
	for _, alg := range slices.Sorted(maps.Keys(ai.Hashes)) {
		return alg + ":" + strings.ToLower(ai.Hashes[alg])
	}
	return ""
}

// requestedSpec is the spec of the request that names it, or the source
// of the request whose URL it was fetched from.
func requestedSpec(it item, reqs []shims.Request) string {
	n := normalize(it.Metadata.Name)
	for _, r := range reqs {
		if r.Name != "" && normalize(r.Name) == n {
			if r.Source != "" {
				return r.Source
			}
			return r.Spec
		}
	}
	for _, r := range reqs {
		if r.Source != "" && r.Name == "" && (r.Source == it.DownloadInfo.URL || strings.Contains(it.DownloadInfo.URL, strings.TrimPrefix(r.Source, "file://"))) {
			return r.Source
		}
	}
	return ""
}

// dependents maps each item's index to the indexes of the items whose
// requires_dist names it.
func dependents(items []item) map[int][]int {
	byName := map[string]int{}
	for i, it := range items {
		byName[normalize(it.Metadata.Name)] = i
	}
	out := map[int][]int{}
	for i, it := range items {
		for _, d := range it.Metadata.RequiresDist {
			m := nameRe().FindStringSubmatch(strings.TrimSpace(d))
			if m == nil {
				continue
			}
			if j, ok := byName[normalize(m[1])]; ok && j != i && !slices.Contains(out[j], i) {
				out[j] = append(out[j], i)
			}
		}
	}
	return out
}

// requestedBy walks up from item i to the nearest requested dependent,
// else names the nearest dependent.
func requestedBy(i int, items []item, parents map[int][]int) string {
	seen := map[int]bool{i: true}
	queue := slices.Clone(parents[i])
	nearest := ""
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if seen[q] {
			continue
		}
		seen[q] = true
		if nearest == "" {
			nearest = items[q].Metadata.Name
		}
		if items[q].Requested {
			return items[q].Metadata.Name
		}
		queue = append(queue, parents[q]...)
	}
	return nearest
}
