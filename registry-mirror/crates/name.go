package crates

import (
	"net/http"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/cargo"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// CheckName accepts the crate names crates.io does
// (listing.CheckCrateName): the mirror's check of a client's path. It
// returns an error wrapping listing.ErrBadCrateName.
func CheckName(name string) error { return listing.CheckCrateName(name) }

// indexName reads an index file's path (beneath index/) as the crate's
// lower-case name: a bad name is a 400, a path that is not where the
// name's file lives a 404.
func indexName(p string) (string, error) {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "", fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "bad index path %q", event.Clip(p, 120))
		}
	}
	i := strings.LastIndexByte(p, '/')
	name := p[i+1:]
	if err := CheckName(name); err != nil {
		return "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%v", err)
	}
	if name != strings.ToLower(name) {
		return "", fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "index file names are lower case, not %q", name)
	}
	if listing.CrateIndexPath(name) != p {
		return "", fetch.Errorf(http.StatusNotFound, "not_found", nil, "the index file of %s is %s, not %s", name, listing.CrateIndexPath(name), event.Clip(p, 120))
	}
	return name, nil
}

// downloadPath reads "<crate>/<version>/download" (beneath dl/).
func downloadPath(p string) (name, version string, err error) {
	parts := strings.Split(p, "/")
	if len(parts) != 3 || parts[2] != "download" {
		return "", "", fetch.Errorf(http.StatusNotFound, "not_found", nil, "crates are at dl/<crate>/<version>/download, not dl/%s", event.Clip(p, 120))
	}
	if err := CheckName(parts[0]); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%v", err)
	}
	if _, err := cargo.ParseVersion(parts[1]); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_version", err, "%q is not a crate version", event.Clip(parts[1], 120))
	}
	return parts[0], parts[1], nil
}
