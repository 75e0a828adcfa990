package broker

import (
	"net/url"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt"
)

// debFile reads the name and version of a .deb file name as apt names
// the files it fetches: name_version_arch.deb, with the version's epoch
// colon written %3a.
func debFile(file string) (name, version string, ok bool) {
	base, isDeb := strings.CutSuffix(file, ".deb")
	parts := strings.Split(base, "_")
	if !isDeb || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	name, err := url.PathUnescape(parts[0])
	if err != nil || !pkgRe.MatchString(name) {
		return "", "", false
	}
	version, err = url.PathUnescape(parts[1])
	if err != nil || version == "" {
		return "", "", false
	}
	return name, version, true
}

// uriRequests are the packages apt-get would fetch, as --print-uris
// lists them: each file's name and version (Exact), or, for a file name
// that does not read as a .deb's, its URL as the Source.
func uriRequests(uris []apt.URI) []shims.Request {
	out := make([]shims.Request, 0, len(uris))
	for _, u := range uris {
		name, version, ok := debFile(u.File)
		if !ok {
			out = append(out, shims.Request{Source: u.URL, Origin: "apt-get --print-uris"})
			continue
		}
		out = append(out, shims.Request{Name: name, Exact: version, Origin: "apt-get --print-uris"})
	}
	return out
}
