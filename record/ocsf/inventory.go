package ocsf

import (
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// Inventory is a session's package list, the packages its installs and
// the mirror's fetches named (record/pkgview builds it from the package
// view), for Software Inventory Info.
type Inventory struct {
	SessionID, Host string
	// Time is when the list was drawn up: the session's last event.
	Time     time.Time
	Packages []*event.Pkg
}

// Software Inventory Info 5020, activity Log: the information comes
// from the record.
const (
	classSoftwareInventory = 5020
	activityInventoryLog   = 1
)

// SoftwareInventory is the Software Inventory Info event (5020) of a
// session's package list: its sbom holds a software component for each
// package, and names the session as the SBOM's subject package (name
// "sandtrail session", version the session id).
func SoftwareInventory(inv Inventory, p Product) Event {
	components := make([]map[string]any, 0, len(inv.Packages))
	for _, pkg := range inv.Packages {
		components = append(components, component(pkg))
	}
	e := &event.Event{TS: inv.Time, SessionID: inv.SessionID, Host: inv.Host, Kind: "session.inventory"}
	m := metadata(e, p)
	delete(m, "sequence") // drawn from many entries, not one
	delete(m, "labels")
	return Event{
		"class_uid":    classSoftwareInventory,
		"category_uid": classSoftwareInventory / 1000,
		"activity_id":  activityInventoryLog,
		"type_uid":     classSoftwareInventory*100 + activityInventoryLog,
		"severity_id":  severityInformational,
		"time":         inv.Time.UnixMilli(),
		"metadata":     m,
		"device":       device(e),
		"sbom": map[string]any{
			"package":             map[string]any{"name": "sandtrail session", "version": firstOf(inv.SessionID, "unknown")},
			"software_components": components,
			"created_time":        inv.Time.UnixMilli(),
			"product":             map[string]any{"name": p.Name, "vendor_name": p.Vendor, "version": p.Version},
		},
	}
}

// component is OCSF's Software Component object of a package: a
// library, named by its purl, with its artifact's hash.
func component(pkg *event.Pkg) map[string]any {
	c := map[string]any{"name": pkg.Name, "version": firstOf(pkg.Resolved, pkg.Requested, "unknown"), "type_id": componentLibrary}
	if pkg.Purl != "" {
		c["purl"] = pkg.Purl
	}
	if pkg.Hash != "" {
		c["hash"] = fingerprint(pkg.Hash)
	}
	return c
}

// componentLibrary is the Software Component object's type_id Library.
const componentLibrary = 2
