package ocsf

import (
	"fmt"

	"github.com/sandtrail/sandtrail/record/event"
)

// ExtensionUID is the uid of sandtrail's OCSF extension, whose classes
// hold what OCSF's core has no class for: a sandbox session's lifecycle
// and its resource limits. An extension class's uid is the extension's
// uid times 100,000 plus category_uid*1000 plus the class's own uid, as
// the Windows extension's (2) Registry Key Activity is 201001. 988 is not
// in OCSF's extensions registry (which grows down from 999); register it
// before relying on it across vendors.
const ExtensionUID = 988

// The extension's classes, in the System Activity category (1).
const (
	classSession = ExtensionUID*100000 + 1*1000 + 1 // Sandbox Session Activity
	classLimit   = ExtensionUID*100000 + 1*1000 + 2 // Resource Limit Activity
)

// The core classes of the kinds that are neither activity nor finding.
const (
	classEventLog = 1008 // Event Log Activity: the record's own events
	classAPI      = 6003 // API Activity: tool and model calls
)

// sessionActivities are Sandbox Session Activity's ids by op.
var sessionActivities = map[string]int{"create": 1, "start": 2, "pause": 3, "resume": 4, "terminate": 5, "cleanup": 6}

// limitActivities are Resource Limit Activity's ids by action.
var limitActivities = map[string]int{event.ActionThrottle: 1, event.ActionKill: 2, event.ActionWarn: 3}

// extensionClassOf is e's class among the extension's and the core's
// record-keeping classes, or false.
func extensionClassOf(e *event.Event) (class, bool) {
	switch {
	case e.Session != nil:
		a, ok := sessionActivities[e.Session.Op]
		if !ok {
			a = activityOther
		}
		return class{class: classSession, activity: a, fill: fillSession}, true
	case e.Limit != nil:
		a, ok := limitActivities[e.Limit.Action]
		if !ok {
			a = activityOther
		}
		return class{class: classLimit, activity: a, fill: fillLimit}, true
	case e.Loss != nil || e.Kernel != nil || e.Journal != nil || e.Retention != nil || e.Investigate != nil:
		return class{class: classEventLog, activity: activityOther, fill: fillEventLog}, true
	case e.Tool != nil || e.Model != nil:
		return class{class: classAPI, activity: activityOther, failed: e.Tool != nil && e.Tool.Status != "" && e.Tool.Status != event.ToolOK, fill: fillAPI}, true
	case e.Pkg != nil && e.Kind == event.KindPkgFilter:
		return class{class: classHTTP, activity: 3, fill: fillFilter}, true
	}
	return class{}, false
}

func fillSession(o Event, e *event.Event) {
	s := e.Session
	sess := map[string]any{"uid": e.SessionID, "op": s.Op}
	for k, v := range map[string]string{"tenant": s.Tenant, "user": s.User, "template": s.Template, "image": s.Image,
		"image_digest": s.ImageDigest, "reason": s.Reason, "actor": s.Actor, "fs_state": s.FSState} {
		if v != "" {
			sess[k] = v
		}
	}
	if s.ExitStatus != nil {
		sess["exit_status"] = *s.ExitStatus
	}
	if s.Limits != nil {
		sess["limits"] = s.Limits
	}
	o["sandbox_session"] = sess
	if e.Proc != nil {
		o["actor"] = actor(e)
	}
}

func fillLimit(o Event, e *event.Event) {
	l := e.Limit
	o["resource_limit"] = map[string]any{"type": l.Type, "measured": l.Measured, "configured": l.Configured, "unit": l.Unit, "action": l.Action}
	if e.Proc != nil {
		o["actor"] = actor(e)
	}
}

func fillEventLog(o Event, e *event.Event) {
	o["log_provider"] = "sandtrail"
	o["log_name"] = "journal"
	switch {
	case e.Loss != nil:
		o["message"] = fmt.Sprintf("%d events lost by %s", e.Loss.Count, e.Loss.Source)
		o["unmapped"] = map[string]any{"loss": e.Loss}
	case e.Kernel != nil:
		o["message"] = "collector capabilities of kernel " + e.Kernel.Release
		o["unmapped"] = map[string]any{"kernel": e.Kernel}
	case e.Journal != nil:
		o["message"] = e.Journal.Detail
		o["unmapped"] = map[string]any{"journal": e.Journal}
	case e.Retention != nil:
		o["log_name"] = "retention"
		o["message"] = retentionMessage(e.Retention)
		o["unmapped"] = map[string]any{"retention": e.Retention}
	case e.Investigate != nil:
		i := e.Investigate
		o["log_name"] = "investigate"
		o["message"] = fmt.Sprintf("sealed tool I/O of %d events of session %s unsealed by %s: %s", len(i.Events), i.Session, i.Actor, i.Reason)
		o["unmapped"] = map[string]any{"investigate": i}
	}
}

// retentionMessage says what a retention event did, in one line.
func retentionMessage(r *event.Retention) string {
	switch r.Op {
	case event.RetentionPrune:
		return fmt.Sprintf("retention pruned %d entries of %d sessions (hot window %d days; %d sessions held)", r.Entries, len(r.Sessions), r.HotDays, len(r.Held))
	case event.RetentionHold:
		return fmt.Sprintf("legal hold placed on session %s by %s", r.Session, r.Actor)
	case event.RetentionRelease:
		return fmt.Sprintf("legal hold on session %s released by %s", r.Session, r.Actor)
	}
	return "retention " + r.Op
}

// fillAPI is a tool or model call, with OCSF's ai_operation profile.
func fillAPI(o Event, e *event.Event) {
	md := o["metadata"].(map[string]any)
	md["profiles"] = []string{"ai_operation"}
	o["actor"] = actor(e)
	o["src_endpoint"] = map[string]any{"name": "session " + e.SessionID}
	switch {
	case e.Tool != nil:
		t := e.Tool
		svc := "tool"
		if t.Server != "" {
			svc = t.Server
		}
		o["api"] = map[string]any{"operation": t.Name, "service": map[string]any{"name": svc}}
		o["duration"] = t.DurationMS
		o["unmapped"] = map[string]any{"tool": t}
	case e.Model != nil:
		m := e.Model
		o["api"] = map[string]any{"operation": "model.io", "service": map[string]any{"name": "model"}}
		if m.Name != "" {
			o["ai_model"] = map[string]any{"name": m.Name}
		}
		o["unmapped"] = map[string]any{"model": m}
	}
}

// fillFilter is the mirror's metadata answer with versions the policy
// removed.
func fillFilter(o Event, e *event.Event) {
	o["http_request"] = map[string]any{"http_method": "GET", "url": map[string]any{"url_string": e.Pkg.SourceURL}}
	o["dst_endpoint"] = map[string]any{"name": "sandtrail mirror"}
	o["unmapped"] = map[string]any{"package": pkgObject(e.Pkg), "removed": e.Pkg.Removed}
}
