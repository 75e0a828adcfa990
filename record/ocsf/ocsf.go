// Package ocsf maps sandtrail's events onto OCSF 1.8.0 (the Open
// Cybersecurity Schema Framework), the structured form SIEMs read: one
// event.Event becomes one OCSF event of the class its kind belongs to,
// with every attribute the class requires. The session is
// metadata.correlation_uid and the journal's seq metadata.sequence, so an
// OCSF event always leads back to the record it came from.
//
// Classes: Process Activity 1007, File System Activity 1001, Network
// Activity 4001, DNS Activity 4003, HTTP Activity 4002 (the mirror's
// fetches and filtered answers), Application Lifecycle 6002 (installs,
// with the Software Package object), Detection Finding 2004 (alerts), API
// Activity 6003 with the ai_operation profile (tool and model calls),
// Event Log Activity 1008 (losses, the kernel's capabilities, journal
// recoveries, retention prunes and legal holds), and sandtrail's extension
// (ExtensionUID) for a session's lifecycle and its resource limits. A
// session's package list, which no one event holds, is Software Inventory
// Info 5020 (SoftwareInventory). Every kind has a class; Map reports
// false only for an event whose kind and body do not agree.
//
// Trust: the mapping adds nothing to what the event says; strings the
// agent chose (argv, paths, names) are carried as the record holds them,
// already redacted.
package ocsf

import (
	"runtime/debug"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// Version is the OCSF version the events are written in.
const Version = "1.8.0"

// Product names the product in metadata.product.
type Product struct {
	Name, Vendor, Version string
}

// Sandtrail is sandtrail as metadata.product names it: its module version
// from the build, "(devel)" for a tree's own build.
func Sandtrail() Product {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return Product{Name: "sandtrail", Vendor: "sandtrail", Version: v}
}

// Event is one OCSF event, as JSON objects are: attribute names to values.
type Event map[string]any

// Map returns the OCSF event of e, and false when e's kind has no OCSF
// class here.
func Map(e *event.Event, p Product) (Event, bool) {
	c, ok := classOf(e)
	if !ok {
		return nil, false
	}
	o := Event{
		"class_uid":    c.class,
		"category_uid": c.class / 1000,
		"activity_id":  c.activity,
		"type_uid":     c.class*100 + c.activity,
		"severity_id":  severityInformational,
		"time":         e.TS.UnixMilli(),
		"metadata":     metadata(e, p),
		"device":       device(e),
	}
	if c.failed {
		o["status_id"] = statusFailure
	}
	c.fill(o, e)
	return o, true
}

// Severity and status ids.
const (
	severityInformational = 1
	statusFailure         = 2
)

// class is an event's OCSF class and activity, and what fills the rest.
type class struct {
	class, activity int
	failed          bool
	fill            func(o Event, e *event.Event)
}

func metadata(e *event.Event, p Product) map[string]any {
	m := map[string]any{
		"version":  Version,
		"product":  map[string]any{"name": p.Name, "vendor_name": p.Vendor, "version": p.Version},
		"sequence": e.Seq,
		"log_name": e.Kind,
		"labels":   []string{"source:" + string(e.Source)},
	}
	if e.SessionID != "" {
		m["correlation_uid"] = e.SessionID
	}
	if e.EventID != "" {
		m["uid"] = e.EventID
	}
	return m
}

// device is the host that recorded the event: a virtual machine or
// container host, named by the event's host.
func device(e *event.Event) map[string]any {
	d := map[string]any{"type_id": deviceServer}
	if e.Host != "" {
		d["hostname"] = e.Host
		d["name"] = e.Host
	} else {
		d["name"] = "unknown"
	}
	return d
}

const deviceServer = 1

// process is OCSF's Process object of p.
func process(p *event.Proc) map[string]any {
	o := map[string]any{"pid": p.Pid}
	if p.Comm != "" {
		o["name"] = p.Comm
	}
	if p.Cwd != "" {
		o["working_directory"] = p.Cwd
	}
	if len(p.Argv) > 0 {
		o["cmd_line"] = strings.Join(p.Argv, " ")
	}
	if path := firstOf(p.ExePath, p.Exe); path != "" {
		f := map[string]any{"path": path, "name": base(path), "type_id": fileRegular}
		if p.ExeSHA256 != "" {
			f["hashes"] = []map[string]any{{"algorithm_id": hashSHA256, "value": p.ExeSHA256}}
		}
		o["file"] = f
	}
	if p.UID != nil {
		o["user"] = map[string]any{"uid": itoa(*p.UID)}
	}
	if p.PPid != 0 {
		o["parent_process"] = map[string]any{"pid": p.PPid}
	}
	if !p.StartTS.IsZero() {
		o["created_time"] = p.StartTS.UnixMilli()
	}
	return o
}

// actor is who did it: the event's process.
func actor(e *event.Event) map[string]any {
	if e.Proc == nil {
		return map[string]any{"app_name": string(e.Source)}
	}
	return map[string]any{"process": process(e.Proc)}
}

const (
	fileRegular = 1
)

// The Fingerprint object's algorithm ids.
const (
	hashUnknown = 0
	hashSHA1    = 2
	hashSHA256  = 3
	hashSHA512  = 4
	hashSHA384  = 9
)

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func base(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 && i < len(p)-1 {
		return p[i+1:]
	}
	return p
}

func itoa(u uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}
