package policies

import (
	"fmt"
	"strings"
)

// DomainBlocked reports whether looking name up is refused: whether it
// matches egress.blocked_domains (case and a trailing dot do not matter).
// reason names the name and the rule, for the record and for the Extended
// DNS Error the DNS proxy returns. It has the signature of the DNS proxy's
// policy (dnsproxy.Policy). The empty name and the root are never
// blocked.
func (e *Engine) DomainBlocked(name string) (blocked bool, reason string) {
	host := strings.TrimSuffix(strings.ToLower(name), ".")
	if host == "" {
		return false, ""
	}
	for _, d := range e.c.blockedDomains {
		if d.match(host) {
			return true, fmt.Sprintf("%s: domain is blocked (%s)", host, d.field)
		}
	}
	return false, ""
}
