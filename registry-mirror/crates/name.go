package crates

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/cargo"
)

// maxNameLen is crates.io's limit on a crate name.
const maxNameLen = 64

// CheckName accepts the crate names crates.io does: at most 64 ASCII
// letters, digits, - and _, beginning with a letter or a digit. It
// returns an error wrapping ErrBadName.
func CheckName(name string) error {
	eco, err := resolver.Lookup(Ecosystem)
	if err != nil {
		return fmt.Errorf("checking a crate name: %w", err)
	}
	if err := eco.CheckName(name); err != nil {
		return fmt.Errorf("%w %q: %w", ErrBadName, render.Clip(name, 120), err)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%w %q: longer than %d characters", ErrBadName, render.Clip(name, 120), maxNameLen)
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '-' && c != '_')) {
			return fmt.Errorf("%w %q: want ASCII letters, digits, - and _, beginning with a letter or digit", ErrBadName, render.Clip(name, 120))
		}
	}
	return nil
}

// prefixOf is the directory of name's index file, as cargo's {prefix}
// writes it: 1, 2, 3/<first character>, or <first two>/<next two>.
func prefixOf(name string) string {
	switch len(name) {
	case 1, 2:
		return fmt.Sprint(len(name))
	case 3:
		return "3/" + name[:1]
	}
	return name[:2] + "/" + name[2:4]
}

// indexPath is the path of name's index file beneath the index.
func indexPath(name string) string {
	lower := strings.ToLower(name)
	return prefixOf(lower) + "/" + lower
}

// indexName reads an index file's path (beneath index/) as the crate's
// lower-case name: a bad name is a 400, a path that is not where the
// name's file lives a 404.
func indexName(p string) (string, error) {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "", fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "bad index path %q", render.Clip(p, 120))
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
	if indexPath(name) != p {
		return "", fetch.Errorf(http.StatusNotFound, "not_found", nil, "the index file of %s is %s, not %s", name, indexPath(name), render.Clip(p, 120))
	}
	return name, nil
}

// downloadPath reads "<crate>/<version>/download" (beneath dl/).
func downloadPath(p string) (name, version string, err error) {
	parts := strings.Split(p, "/")
	if len(parts) != 3 || parts[2] != "download" {
		return "", "", fetch.Errorf(http.StatusNotFound, "not_found", nil, "crates are at dl/<crate>/<version>/download, not dl/%s", render.Clip(p, 120))
	}
	if err := CheckName(parts[0]); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%v", err)
	}
	if _, err := cargo.ParseVersion(parts[1]); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_version", err, "%q is not a crate version", render.Clip(parts[1], 120))
	}
	return parts[0], parts[1], nil
}
