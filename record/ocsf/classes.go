package ocsf

import (
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// The OCSF classes sandtrail's kinds map to.
const (
	classFile      = 1001
	classProcess   = 1007
	classFinding   = 2004
	classNetwork   = 4001
	classHTTP      = 4002
	classDNS       = 4003
	classLifecycle = 6002
	activityOther  = 99
)

// classOf is e's class and activity, or false for a kind with none here.
func classOf(e *event.Event) (class, bool) {
	switch {
	case e.Proc != nil && strings.HasPrefix(e.Kind, "process."):
		return processClass(e), true
	case e.File != nil:
		return fileClass(e), true
	case e.Net != nil && e.Net.DNS != nil:
		return class{class: classDNS, activity: 6, fill: fillDNS}, true
	case e.Net != nil:
		return netClass(e), true
	case e.Pkg != nil && e.Kind == event.KindPkgFetch:
		return class{class: classHTTP, activity: 3, failed: e.Pkg.Outcome != "" && e.Pkg.Outcome != "served", fill: fillFetch}, true
	case e.Pkg != nil && (e.Kind == event.KindPkgInstall || e.Kind == event.KindPkgBlocked):
		return class{class: classLifecycle, activity: 1, failed: e.Kind == event.KindPkgBlocked, fill: fillInstall}, true
	case e.Alert != nil:
		return class{class: classFinding, activity: 1, fill: fillFinding}, true
	}
	return extensionClassOf(e)
}

// Process Activity: 1 Launch, 2 Terminate, 99 Other.
func processClass(e *event.Event) class {
	c := class{class: classProcess, activity: activityOther, fill: fillProcess}
	switch e.Kind {
	case event.KindExec:
		c.activity = 1
	case event.KindExecFailed:
		c.activity, c.failed = 1, true
	case event.KindExit:
		c.activity = 2
	}
	return c
}

func fillProcess(o Event, e *event.Event) {
	o["process"] = process(e.Proc)
	act := map[string]any{"process": map[string]any{"pid": e.Proc.PPid}}
	if e.Proc.PPid == 0 {
		act = map[string]any{"app_name": string(e.Source)}
	}
	o["actor"] = act
	if e.Proc.ExitCode != nil {
		o["exit_code"] = *e.Proc.ExitCode
	}
}

// fileActivities are File System Activity's ids by op: 1 Create, 2 Read,
// 3 Update, 4 Delete, 5 Rename, 6 Set Attributes, 12 Mount, 13 Unmount.
var fileActivities = map[string]int{"create": 1, "link": 1, "read": 2, "write": 3, "truncate": 3, "delete": 4,
	"rename": 5, "chmod": 6, "mount": 12, "umount": 13}

func fileClass(e *event.Event) class {
	a, ok := fileActivities[e.File.Op]
	if !ok {
		a = activityOther
	}
	return class{class: classFile, activity: a, failed: e.File.Errno != "", fill: fillFile}
}

const fileDir, fileSymlink = 2, 3

func fillFile(o Event, e *event.Event) {
	f := map[string]any{"path": e.File.Path, "name": base(e.File.Path), "type_id": fileRegular}
	switch {
	case e.File.Dir:
		f["type_id"] = fileDir
	case e.File.Symlink:
		f["type_id"] = fileSymlink
	}
	o["file"] = f
	if e.File.NewPath != "" {
		o["file_result"] = map[string]any{"path": e.File.NewPath, "name": base(e.File.NewPath), "type_id": fileRegular}
	}
	o["actor"] = actor(e)
}

// Network Activity: 1 Open, 2 Close, 5 Refuse, 6 Traffic, 7 Listen, 99
// Other.
func netClass(e *event.Event) class {
	c := class{class: classNetwork, activity: activityOther, fill: fillNet}
	switch e.Kind {
	case event.KindNetConnect, event.KindNetAccept:
		c.activity = 1
	case event.KindNetClose:
		c.activity = 2
	case event.KindNetSend:
		c.activity = 6
	case event.KindNetListen:
		c.activity = 7
	}
	if e.Net.Verdict == "blocked" {
		c.activity = 5
	}
	return c
}

func endpoint(ip string, port uint16, domain string) map[string]any {
	ep := map[string]any{}
	if ip != "" {
		ep["ip"] = ip
	}
	if port != 0 {
		ep["port"] = port
	}
	if domain != "" {
		ep["domain"] = domain
		ep["hostname"] = domain
	}
	return ep
}

func fillNet(o Event, e *event.Event) {
	n := e.Net
	dst := endpoint(n.DstIP, n.DstPort, n.Domain)
	if n.UnixPath != "" {
		dst["name"] = n.UnixPath
	}
	if len(dst) == 0 {
		dst["name"] = "unknown"
	}
	o["dst_endpoint"] = dst
	if src := endpoint(n.SrcIP, n.SrcPort, ""); len(src) > 0 {
		o["src_endpoint"] = src
	}
	if n.Proto != "" {
		o["connection_info"] = map[string]any{"protocol_name": n.Proto}
	}
	if n.BytesIn+n.BytesOut > 0 {
		o["traffic"] = map[string]any{"bytes_in": n.BytesIn, "bytes_out": n.BytesOut}
	}
	if n.Verdict != "" {
		o["disposition"] = n.Verdict
	}
	o["actor"] = actor(e)
}

func fillDNS(o Event, e *event.Event) {
	d := e.Net.DNS
	o["query"] = map[string]any{"hostname": d.Query, "type": d.QType}
	if d.RCode != "" {
		o["rcode"] = d.RCode
	}
	var answers []map[string]any
	for _, a := range d.Answers {
		answers = append(answers, map[string]any{"rdata": a.Data, "type": a.Type, "ttl": a.TTL})
	}
	if answers != nil {
		o["answers"] = answers
	}
	src := endpoint(e.Net.SrcIP, e.Net.SrcPort, "")
	if len(src) == 0 {
		src["name"] = "session"
	}
	o["src_endpoint"] = src
	o["actor"] = actor(e)
}

// pkgObject is OCSF's Software Package object of p.
func pkgObject(p *event.Pkg) map[string]any {
	v := firstOf(p.Resolved, p.Requested, "unknown")
	o := map[string]any{"name": p.Name, "version": v}
	if p.Purl != "" {
		o["purl"] = p.Purl
	}
	if p.Manager != "" {
		o["package_manager"] = p.Manager
	}
	if p.Hash != "" {
		o["hash"] = fingerprint(p.Hash)
	}
	if p.SourceURL != "" {
		o["src_url"] = p.SourceURL
	}
	return o
}

func fillFetch(o Event, e *event.Event) {
	p := e.Pkg
	o["http_request"] = map[string]any{"http_method": "GET", "url": map[string]any{"url_string": p.SourceURL}}
	o["dst_endpoint"] = map[string]any{"name": "sandtrail mirror"}
	if p.Client != "" {
		o["src_endpoint"] = map[string]any{"name": p.Client}
	}
	o["unmapped"] = map[string]any{"package": pkgObject(p), "outcome": p.Outcome, "rule": p.Rule, "verified": p.Verified}
}

func fillInstall(o Event, e *event.Event) {
	o["app"] = map[string]any{"name": e.Pkg.Name, "version": firstOf(e.Pkg.Resolved, e.Pkg.Requested, "unknown")}
	o["package"] = pkgObject(e.Pkg)
	if e.Pkg.Reason != "" {
		o["status_detail"] = e.Pkg.Reason
	}
	o["actor"] = actor(e)
}

// findingSeverities are Detection Finding's severity ids by Sigma level.
var findingSeverities = map[string]int{"informational": 1, "low": 2, "medium": 3, "high": 4, "critical": 5}

func fillFinding(o Event, e *event.Event) {
	a := e.Alert
	info := map[string]any{"uid": a.RuleID, "title": a.Title, "analytic": map[string]any{"uid": a.RuleID, "name": a.Title, "type_id": 1}}
	if a.Summary != "" {
		info["desc"] = a.Summary
	}
	if len(a.Tags) > 0 {
		info["types"] = a.Tags
	}
	if len(a.Refs) > 0 {
		info["related_events_count"] = len(a.Refs)
	}
	o["finding_info"] = info
	if s, ok := findingSeverities[a.Level]; ok {
		o["severity_id"] = s
	}
	if a.Package != "" {
		o["unmapped"] = map[string]any{"package": a.Package, "advisory": a.Advisory, "refs": a.Refs}
	} else if len(a.Refs) > 0 {
		o["unmapped"] = map[string]any{"refs": a.Refs}
	}
	if e.Proc != nil {
		o["actor"] = actor(e)
	}
}

// fingerprint is OCSF's Fingerprint object of a package hash as the
// ecosystem writes it: "sha256:<hex>", or a Subresource Integrity
// "sha512-<base64>" (npm's; its value in hex, as OCSF writes them); any
// other form is algorithm Unknown, with the hash as written.
func fingerprint(h string) map[string]any {
	algos := map[string]int{"sha1": hashSHA1, "sha256": hashSHA256, "sha384": hashSHA384, "sha512": hashSHA512}
	if algo, v, ok := strings.Cut(h, ":"); ok && algos[algo] != 0 {
		return map[string]any{"algorithm_id": algos[algo], "value": v}
	}
	if algo, v, ok := strings.Cut(h, "-"); ok && algos[algo] != 0 {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			return map[string]any{"algorithm_id": algos[algo], "value": hex.EncodeToString(b)}
		}
	}
	return map[string]any{"algorithm_id": hashUnknown, "value": h}
}
