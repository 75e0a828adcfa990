package sink

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// The fixed parts of a syslog sink's messages, and its defaults.
const (
	// SyslogAppName is every message's APP-NAME.
	SyslogAppName = "sandtrail"
	// DefaultSyslogSDID is the SD-ID of the structured data element that
	// carries an entry's seq. sandtrail has no IANA Private Enterprise
	// Number of its own: 32473 is the one RFC 5612 reserves for
	// documentation (RFC 5424's examples use it). An operator with a PEN
	// sets their own (SyslogConfig.SDID).
	DefaultSyslogSDID = "sandtrail@32473"
	// DefaultSyslogFacility is the facility of the messages' PRI.
	DefaultSyslogFacility = "local0"
	// DefaultSyslogMaxMessage bounds one message (the SYSLOG-MSG, without
	// its octet count); SyslogMinMessage is the least a sink accepts,
	// the size RFC 5425 says every receiver must take.
	DefaultSyslogMaxMessage = 64 << 10
	SyslogMinMessage        = 2048
)

// RFC 5424's field limits.
const (
	maxHostname = 255
	maxMsgID    = 32
	maxSDName   = 32
)

// syslogFacilities are RFC 5424's facilities, by code.
var syslogFacilities = []string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
	"authpriv", "ftp", "ntp", "audit", "alert", "clock", "local0", "local1", "local2", "local3", "local4", "local5",
	"local6", "local7"}

// SyslogFacility is the code of a facility, by name (kern, user, ...,
// local7, as in RFC 5424's table) or number (0-23); "" is
// DefaultSyslogFacility.
func SyslogFacility(name string) (int, error) {
	if name == "" {
		name = DefaultSyslogFacility
	}
	for i, f := range syslogFacilities {
		if f == name {
			return i, nil
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < len(syslogFacilities) {
		return n, nil
	}
	return 0, fmt.Errorf("syslog sink: facility %q: want one of %s or 0-23", name, strings.Join(syslogFacilities, ", "))
}

// Severities (RFC 5424 §6.2.1).
const (
	severityCritical      = 2
	severityError         = 3
	severityWarning       = 4
	severityNotice        = 5
	severityInformational = 6
)

// alertSeverities are the severities of alerts by Sigma level; OCSF's
// severity ids (1 informational to 5 critical) index ocsfLevels.
var (
	alertSeverities = map[string]int{"critical": severityCritical, "high": severityError, "medium": severityWarning,
		"low": severityNotice, "informational": severityInformational}
	ocsfLevels = []string{1: "informational", 2: "low", 3: "medium", 4: "high", 5: "critical"}
)

// syslogSeverity is an entry's severity: an alert's by its level (a
// stored event's alert.level, an OCSF finding's severity_id; notice when
// it has none known), informational for everything else.
func syslogSeverity(e Entry) int {
	if e.Kind != event.KindAlert || e.Checkpoint != 0 {
		return severityInformational
	}
	var a struct {
		Alert *struct {
			Level string `json:"level"`
		} `json:"alert"`
		SeverityID int `json:"severity_id"`
	}
	if json.Unmarshal(e.Line, &a) != nil {
		return severityNotice
	}
	level := ""
	switch {
	case a.Alert != nil:
		level = a.Alert.Level
	case a.SeverityID > 0 && a.SeverityID < len(ocsfLevels):
		level = ocsfLevels[a.SeverityID]
	}
	if s, ok := alertSeverities[level]; ok {
		return s
	}
	return severityNotice
}

// ValidSDID reports whether id is a private SD-ID, name@number: at most
// 32 printable US-ASCII characters, none of '=', ' ', ']' and '"', and a
// private enterprise number (digits, dot-separated) after the one '@'.
func ValidSDID(id string) bool {
	name, pen, ok := strings.Cut(id, "@")
	if !ok || name == "" || pen == "" || len(id) > maxSDName || strings.ContainsAny(name, "=]\"@") {
		return false
	}
	for _, c := range []byte(name) {
		if c < 33 || c > 126 {
			return false
		}
	}
	for _, part := range strings.Split(pen, ".") {
		if part == "" || strings.Trim(part, "0123456789") != "" {
			return false
		}
	}
	return true
}

// printUSASCII is s with every byte outside printable US-ASCII (33-126)
// replaced by '_', cut to max bytes; "-" (the NILVALUE) when empty.
func printUSASCII(s string, max int) string {
	if s == "" {
		return "-"
	}
	b := []byte(s[:min(len(s), max)])
	for i, c := range b {
		if c < 33 || c > 126 {
			b[i] = '_'
		}
	}
	return string(b)
}

// appendParamValue appends v to b escaped as an SD PARAM-VALUE: '"', '\'
// and ']' each behind a backslash (RFC 5424 §6.3.3).
func appendParamValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"', '\\', ']':
			b = append(b, '\\')
		}
		b = append(b, v[i])
	}
	return b
}

// appendTimestamp appends t as RFC 5424's TIMESTAMP, in UTC with
// microseconds, or the NILVALUE for a zero time or one outside years
// 1-9999.
func appendTimestamp(b []byte, t time.Time) []byte {
	if t.IsZero() || t.Year() < 1 || t.Year() > 9999 {
		return append(b, '-')
	}
	return t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
}

// syslogFormat is how one sink writes its entries as RFC 5424 messages.
type syslogFormat struct {
	facility int
	// hostname is the HOSTNAME field, and the SD's host parameter.
	hostname string
	procID   string
	sdID     string
	max      int
}

// message is e as one RFC 5424 message:
//
//	<PRI>1 TIMESTAMP HOSTNAME sandtrail PROCID MSGID [SD-ID seq="N" host="H"] LINE
//
// MSGID is the kind (checkpoint for a checkpoint, whose SD carries
// checkpoint="SIZE" in place of seq) and LINE the entry's JSON as it is,
// UTF-8 with no BOM. A message longer than f.max carries in place of the
// line {"sandtrail_oversize":{"seq":N,"kind":"K","bytes":LEN}}, for the
// reader to fetch the entry from the journal.
func (f *syslogFormat) message(b []byte, e Entry) []byte {
	start := len(b)
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(f.facility*8+syslogSeverity(e)), 10)
	b = append(b, ">1 "...)
	b = appendTimestamp(b, e.TS)
	msgID := printUSASCII(e.Kind, maxMsgID)
	if e.Checkpoint != 0 {
		msgID = "checkpoint"
	}
	b = append(b, ' ')
	b = append(b, f.hostname...)
	b = append(b, " "+SyslogAppName+" "...)
	b = append(b, f.procID...)
	b = append(b, ' ')
	b = append(b, msgID...)
	b = append(b, " ["...)
	b = append(b, f.sdID...)
	if e.Checkpoint != 0 {
		b = append(b, ` checkpoint="`...)
		b = strconv.AppendUint(b, e.Checkpoint, 10)
	} else {
		b = append(b, ` seq="`...)
		b = strconv.AppendUint(b, e.Seq, 10)
	}
	b = append(b, `" host="`...)
	b = appendParamValue(b, f.hostname)
	b = append(b, `"] `...)
	if len(b)-start+len(e.Line) <= f.max {
		return append(b, e.Line...)
	}
	stub, _ := json.Marshal(map[string]map[string]any{"sandtrail_oversize": {"seq": e.Seq, "kind": msgID, "bytes": len(e.Line)}})
	return append(b, stub...)
}

// frame is e's message octet-counted (RFC 6587 §3.4.1): MSG-LEN SP
// SYSLOG-MSG.
func (f *syslogFormat) frame(e Entry) []byte {
	msg := f.message(make([]byte, 0, 256+len(e.Line)), e)
	out := strconv.AppendInt(make([]byte, 0, len(msg)+8), int64(len(msg)), 10)
	out = append(out, ' ')
	return append(out, msg...)
}
