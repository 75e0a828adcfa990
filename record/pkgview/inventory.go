package pkgview

import (
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ocsf"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Inventory is v's package list as OCSF's Software Inventory Info carries
// it (ocsf.SoftwareInventory): the packages a CycloneDX BOM of v holds, on
// host, at the time of the latest of them.
func Inventory(v *View, host string) ocsf.Inventory {
	inv := ocsf.Inventory{SessionID: v.SessionID, Host: host, Packages: []*event.Pkg{}}
	for _, p := range v.Packages {
		if !inBOM(p) {
			continue
		}
		u := p.Purl
		if u == "" {
			u = purl.Of(p.Ecosystem, p.Name, p.Version)
		}
		inv.Packages = append(inv.Packages, &event.Pkg{Ecosystem: p.Ecosystem, Name: p.Name, Resolved: p.Version,
			Purl: u, Hash: artifactHash(p), Manager: p.Manager, SourceURL: cmpOr(p.UpstreamURL, p.SourceURL)})
		if p.Time.After(inv.Time) {
			inv.Time = p.Time
		}
	}
	if inv.Time.IsZero() {
		inv.Time = time.Now()
	}
	return inv
}
