package resolver

import (
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/purl"
)

// FromPurl returns the ecosystem of a parsed purl (its type) and the purl's package name as
// the ecosystem writes it. It is the one place where a purl's namespace and name are joined,
// the inverse of [purl.Of]: an npm scope is part of the name ("@babel/core"; a scope written
// without its @, pkg:npm/babel/core, gets one), so is an OCI path ("library/alpine"), and a
// Debian vendor is not (pkg:deb/debian/curl is curl). It checks nothing else of the name
// ([Ecosystem.CheckName] does).
//
// The errors: the type is no ecosystem's (wrapping [ErrUnknownEcosystem]), or the purl has a
// namespace where the ecosystem's names have none (pkg:pypi/org/requests).
func FromPurl(p purl.Purl) (*Ecosystem, string, error) {
	e, err := Lookup(p.Type)
	if err != nil {
		return nil, "", err
	}
	switch {
	case p.Namespace == "":
		return e, p.Name, nil
	case e.Namespace() == Scope:
		return e, "@" + strings.TrimPrefix(p.Namespace, "@") + "/" + p.Name, nil
	case e.Namespace() == Path:
		return e, p.Namespace + "/" + p.Name, nil
	case e.Namespace() == Vendor:
		return e, p.Name, nil
	}
	return nil, "", fmt.Errorf("%s packages have no namespace", e.Name())
}
