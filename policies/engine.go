package policies

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
)

// Engine applies a compiled policy. It is immutable and safe for concurrent
// use.
type Engine struct {
	p    *Policy
	c    *compiled
	home string
	now  func() time.Time

	// redacted memoizes redactURL: the mirror asks about the same source
	// URLs over and over, and redaction runs its patterns on each.
	redacted  sync.Map
	nredacted atomic.Int64
}

// maxRedacted bounds redacted.
const maxRedacted = 1 << 16

// redactURL is event.RedactURL, remembered.
func (e *Engine) redactURL(u string) string {
	if r, ok := e.redacted.Load(u); ok {
		return r.(string)
	}
	r := event.RedactURL(u)
	if e.nredacted.Add(1) > maxRedacted {
		e.redacted.Clear()
		e.nredacted.Store(0)
	}
	e.redacted.Store(u, r)
	return r
}

// Option configures an Engine.
type Option func(*Engine)

// WithHome sets the agent's home directory, against which "~/" paths in
// files are expanded. Without it, "~/x" matches /root/x and /home/USER/x
// for every USER.
func WithHome(dir string) Option {
	return func(e *Engine) { e.home = path.Clean(dir) }
}

// WithClock sets the clock used for the cooldown. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(e *Engine) { e.now = now }
}

// New compiles p into an Engine. It returns Errors if p is invalid.
func New(p *Policy, opts ...Option) (*Engine, error) {
	if p == nil {
		return nil, fmt.Errorf("policy: nil policy")
	}
	c, ce := compile(p)
	if err := ce.result("", nil); err != nil {
		return nil, err
	}
	e := &Engine{p: p, c: c, now: time.Now}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Policy returns the policy the engine applies. Callers must not modify it.
func (e *Engine) Policy() *Policy { return e.p }

// Decision is the engine's answer.
type Decision struct {
	// Verdict is allow, flag or block.
	Verdict Verdict `json:"verdict"`
	// Reason says why, for a human.
	Reason string `json:"reason"`
	// Rule is the field path of the rule that decided, such as
	// "blocklist[3]" or "cooldown.min_age"; empty when no rule applies.
	Rule string `json:"rule,omitempty"`
	// Checks are the individual checks of a package decision, in order.
	Checks []Check `json:"checks,omitempty"`
	// Until is when a package decision may next change by the passing of
	// time alone (the end of the cooldown of a version inside it); zero
	// when nothing it depends on changes with the time. The mirror keeps
	// its decisions no longer.
	Until time.Time `json:"-"`
}

// Check is the outcome of one check of a package decision.
type Check struct {
	// Name is one of the Check names below (CheckBlocklist …), as written
	// on the wire.
	Name    string  `json:"check"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	Rule    string  `json:"rule,omitempty"`
}

// The names of a decision's checks (Check.Name), in the order Package runs
// them. They are wire values: pkg events, the mirror's outcomes and
// `sandtrail policy explain` carry them.
const (
	// CheckRequest refuses a request that names too little to be checked.
	CheckRequest = "request"
	// CheckBlocklist is the blocklist.
	CheckBlocklist = "blocklist"
	// CheckSource is the source check: an approved registry, host or
	// direct URL, else on_unknown_source.
	CheckSource = "source"
	// CheckCooldown is the minimum age of a version.
	CheckCooldown = "cooldown"
	// CheckInstallScripts is the install_scripts rule.
	CheckInstallScripts = "install_scripts"
	// CheckProvenance is the provenance_loss rule.
	CheckProvenance = "provenance"
)

// PackageRequest describes one package version that a client is about to
// install, or that the mirror is about to serve.
type PackageRequest struct {
	// Ecosystem is the purl type: npm, pypi, cargo, deb, oci.
	Ecosystem string
	// Name is the package name as the ecosystem writes it ("@scope/name").
	Name string
	// Version is the resolved, exact version. Empty means not yet resolved:
	// a blocklist entry with a range then blocks, because it cannot be
	// ruled out.
	Version string
	// Requested is the spec the agent asked for; it is only reported.
	Requested string
	// Source is where the artifact comes from: a registry or artifact URL,
	// a git URL (git+https://…, git@host:path, github:owner/repo) or a
	// direct URL or file.
	Source string
	// Registry is the registry the client was configured with, if known.
	// Unlike Source it is never treated as a direct URL: it must match an
	// approved registry.
	Registry string
	// Published is when the version was published; zero if unknown.
	Published time.Time
	// ProvenanceLost is true when earlier versions of the package had
	// provenance attestations and this one has none (the mirror tells).
	ProvenanceLost bool
	// InstallScripts is true when installing runs the package's code (npm
	// install scripts, a Python sdist). Callers that cannot tell pass false.
	InstallScripts bool
}

// Package decides whether a package version may be installed. The checks
// run in this order: blocklist, source, cooldown, install scripts, and
// provenance when the request reports a lost provenance. The
// verdict is the most severe of theirs; Reason and Rule are those of the
// first check with that verdict (for an allow, of the source check), and
// Checks lists every check. It never fails: where a check cannot decide, it
// fails closed and says so. ctx is for future checks that look things up.
func (e *Engine) Package(ctx context.Context, req PackageRequest) Decision {
	_ = ctx
	req.Ecosystem = strings.ToLower(req.Ecosystem)
	if req.Ecosystem == "" || req.Name == "" {
		return combine([]Check{{Name: CheckRequest, Verdict: Block, Reason: "the request names no ecosystem or package"}})
	}
	cooldown := e.checkCooldown(req)
	checks := []Check{e.checkBlocklist(req, false), e.checkSource(req), cooldown, e.checkScripts(req)}
	if req.ProvenanceLost {
		checks = append(checks, e.checkProvenance(req))
	}
	d := combine(checks)
	if cooldown.Rule == "cooldown.min_age" && cooldown.Verdict != Allow {
		d.Until = req.Published.Add(e.c.minAge)
	}
	return d
}

// PreInstall decides a request before its package manager runs, when only
// what was asked for is known: the blocklist and the source, and the
// cooldown when the request pins a version (Version is set). Install
// scripts and provenance are the mirror's to check, on the artifact it
// serves, as is a blocklisted version range when the version is not
// pinned (the mirror hides those versions). A request may name no package
// when its source does (a direct URL, an extra index): only the source is
// then checked.
func (e *Engine) PreInstall(ctx context.Context, req PackageRequest) Decision {
	_ = ctx
	req.Ecosystem = strings.ToLower(req.Ecosystem)
	switch {
	case req.Ecosystem == "" || (req.Name == "" && req.Source == "" && req.Registry == ""):
		return combine([]Check{{Name: CheckRequest, Verdict: Block, Reason: "the request names no ecosystem, package or source"}})
	case req.Name == "":
		return combine([]Check{e.checkSource(req)})
	}
	checks := []Check{e.checkBlocklist(req, true), e.checkSource(req)}
	if req.Version != "" {
		checks = append(checks, e.checkCooldown(req))
	}
	return combine(checks)
}

func combine(checks []Check) Decision {
	worst := 0
	for _, c := range checks {
		worst = max(worst, severity(c.Verdict))
	}
	d := Decision{Checks: checks}
	if worst == 0 {
		d.Verdict = Allow
		for _, c := range checks {
			if c.Name == CheckSource {
				d.Reason, d.Rule = "no check blocks or flags it; "+c.Reason, c.Rule
			}
		}
		return d
	}
	for _, c := range checks {
		if severity(c.Verdict) == worst {
			d.Verdict, d.Reason, d.Rule = c.Verdict, c.Reason, c.Rule
			return d
		}
	}
	return d
}

func pkgID(req PackageRequest) string {
	p := Purl{Type: req.Ecosystem, Name: req.Name, Version: req.Version}
	return p.String()
}

// checkBlocklist checks req against the blocklist. An unresolved request
// (no Version) may be in a blocklisted range: it is blocked, unless
// pending says that it will be resolved through the mirror, which takes
// the range's versions out of what it serves; entries that block every
// version still apply.
func (e *Engine) checkBlocklist(req PackageRequest, pending bool) Check {
	c := e.c
	name := resolver.NormalizeName(req.Ecosystem, req.Name)
	exact := c.blockByName[req.Ecosystem+"\x00"+name]
	// Visit the exact-name and glob entries that may apply, in list order.
	var (
		ver    resolver.Version
		verErr error
		parsed bool
	)
	for i, j := 0, 0; i < len(exact) || j < len(c.blockGlobs); {
		var k int
		if j >= len(c.blockGlobs) || (i < len(exact) && exact[i] < c.blockGlobs[j]) {
			k, i = exact[i], i+1
		} else {
			k, j = c.blockGlobs[j], j+1
		}
		b := &c.block[k]
		if b.glob && !b.purl.MatchName(req.Ecosystem, req.Name) {
			continue
		}
		if b.rng == "" {
			return Check{Name: CheckBlocklist, Verdict: Block, Rule: b.field,
				Reason: fmt.Sprintf("%s is blocklisted (%s): %s", pkgID(req), b.purl, b.reason)}
		}
		if req.Version == "" && pending {
			continue // the mirror filters the range out of what it serves
		}
		if req.Version == "" {
			return Check{Name: CheckBlocklist, Verdict: Block, Rule: b.field,
				Reason: fmt.Sprintf("version not resolved, so it may be in the blocklisted range %s of %s: %s", b.rng, b.purl.Name, b.reason)}
		}
		var in bool
		if b.spec == nil {
			in = b.rng == req.Version // a tag, for ecosystems without ranges
		} else {
			if !parsed {
				parsed = true
				if ver = parseVersion(req.Ecosystem, req.Version); ver == nil {
					verErr = errVersion(req.Ecosystem, req.Version)
				}
			}
			if verErr != nil {
				return Check{Name: CheckBlocklist, Verdict: Block, Rule: b.field,
					Reason: fmt.Sprintf("cannot tell whether %s is in the blocklisted range %s (%v): %s", pkgID(req), b.rng, verErr, b.reason)}
			}
			in = b.spec.Match(ver)
		}
		if in {
			return Check{Name: CheckBlocklist, Verdict: Block, Rule: b.field,
				Reason: fmt.Sprintf("%s is blocklisted (%s versions %s): %s", pkgID(req), b.purl.Name, b.rng, b.reason)}
		}
	}
	return Check{Name: CheckBlocklist, Verdict: Allow, Reason: "not on the blocklist"}
}

// parseVersion parses v in ecosystem eco, or returns nil.
func parseVersion(eco, v string) resolver.Version {
	e, err := resolver.Lookup(eco)
	if err != nil {
		return nil
	}
	pv, err := e.ParseVersion(v)
	if err != nil {
		return nil
	}
	return pv
}

// errVersion says why v does not parse in eco.
func errVersion(eco, v string) error {
	_, err := resolver.Compare(eco, v, v)
	if err == nil {
		err = fmt.Errorf("unparseable %s version %q", eco, v)
	}
	return err
}

func (e *Engine) checkSource(req PackageRequest) Check {
	if req.Source == "" && req.Registry == "" {
		return e.unknownSource("no source URL given")
	}
	var ok Check
	if req.Registry != "" {
		c, approved := e.matchRegistry(req.Ecosystem, req.Registry)
		if !approved {
			return e.unknownSource(fmt.Sprintf("registry %s is not an approved %s registry", event.RedactURL(req.Registry), req.Ecosystem))
		}
		ok = c
	}
	if req.Source != "" {
		c := e.classifySource(req.Ecosystem, req.Source)
		if c.Verdict != Allow {
			return c
		}
		ok = c
	}
	return ok
}

func (e *Engine) unknownSource(why string) Check {
	return Check{Name: CheckSource, Verdict: e.c.onUnknown, Rule: "on_unknown_source", Reason: "unknown source: " + why}
}

// UpstreamApproved reports whether the policy can approve anything that
// a registry of ecosystem eco at raw (an upstream's base URL, as the
// mirror is configured with) serves: some sources.registries prefix of eco
// is on raw's scheme and host, with a path beneath raw's or above it. The
// mirror refuses to start with an upstream it is not: every package from
// it would be refused as an unknown source.
func (e *Engine) UpstreamApproved(eco, raw string) bool {
	u, err := url.Parse(strings.TrimPrefix(strings.TrimPrefix(raw, "sparse+"), "registry+"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	host, p := normHost(u), dirPath(u.Path)
	for _, pre := range e.c.registries[eco] {
		if u.Scheme == pre.scheme && host == pre.host && (strings.HasPrefix(p, pre.path) || strings.HasPrefix(pre.path, p)) {
			return true
		}
	}
	return false
}

// matchRegistry checks raw against the ecosystem's approved prefixes.
func (e *Engine) matchRegistry(eco, raw string) (Check, bool) {
	s := strings.TrimPrefix(strings.TrimPrefix(raw, "sparse+"), "registry+")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Check{}, false
	}
	host, p := normHost(u), path.Clean("/"+u.Path)
	for _, pre := range e.c.registries[eco] {
		if u.Scheme != pre.scheme || host != pre.host {
			continue
		}
		if p+"/" == pre.path || strings.HasPrefix(p, pre.path) {
			return Check{Name: CheckSource, Verdict: Allow, Rule: pre.field,
				Reason: fmt.Sprintf("source %s is under the approved %s registry %s", e.redactURL(raw), eco, pre.raw)}, true
		}
	}
	return Check{}, false
}

// classifySource decides a Source: a git URL against git_hosts, an http URL
// against the registries, anything else as a direct URL.
func (e *Engine) classifySource(eco, raw string) Check {
	if host, isGit := gitHost(raw); isGit {
		if host == "" {
			return e.unknownSource(fmt.Sprintf("cannot find the host of git source %s", e.redactURL(raw)))
		}
		for _, h := range e.c.gitHosts {
			if h.match(host) {
				return Check{Name: CheckSource, Verdict: Allow, Rule: h.field,
					Reason: fmt.Sprintf("git source on approved host %s", host)}
			}
		}
		return e.unknownSource(fmt.Sprintf("git host %s is not approved", host))
	}
	if c, ok := e.matchRegistry(eco, raw); ok {
		return c
	}
	if e.c.allowDirect {
		return Check{Name: CheckSource, Verdict: Allow, Rule: "sources.allow_direct_urls",
			Reason: fmt.Sprintf("direct source %s allowed by allow_direct_urls", e.redactURL(raw))}
	}
	return e.unknownSource(fmt.Sprintf("%s is not under an approved %s registry, and direct URLs are not allowed", e.redactURL(raw), eco))
}

// npmHosts are npm's hosted-git shorthands.
var npmHosts = map[string]string{"github": "github.com", "gitlab": "gitlab.com", "bitbucket": "bitbucket.org", "gist": "gist.github.com"}

// gitHost reports whether raw names a git source, and its lower-case host.
func gitHost(raw string) (host string, isGit bool) {
	s := strings.TrimSpace(raw)
	scheme, rest, hasScheme := strings.Cut(s, ":")
	if hasScheme {
		if h, ok := npmHosts[strings.ToLower(scheme)]; ok && !strings.HasPrefix(rest, "//") {
			return h, true
		}
	}
	switch ls := strings.ToLower(s); {
	case strings.HasPrefix(ls, "git+"), strings.HasPrefix(ls, "git://"), strings.HasPrefix(ls, "ssh://"):
		u, err := url.Parse(strings.TrimPrefix(strings.TrimPrefix(s, "git+"), "GIT+"))
		if err != nil {
			return "", true
		}
		return strings.ToLower(u.Hostname()), true
	case !strings.Contains(s, "://") && hasScheme && strings.Contains(scheme, "@") && !strings.Contains(scheme, "/"):
		// scp-like: user@host:path
		_, h, _ := strings.Cut(scheme, "@")
		return strings.ToLower(h), true
	case strings.HasPrefix(ls, "https://") || strings.HasPrefix(ls, "http://"):
		if u, err := url.Parse(s); err == nil && strings.HasSuffix(u.Path, ".git") {
			return strings.ToLower(u.Hostname()), true
		}
	}
	return "", false
}

func (e *Engine) checkCooldown(req PackageRequest) Check {
	if e.c.minAge <= 0 {
		return Check{Name: CheckCooldown, Verdict: Allow, Reason: "no cooldown"}
	}
	for _, x := range e.c.exclude {
		if x.purl.MatchName(req.Ecosystem, req.Name) {
			return Check{Name: CheckCooldown, Verdict: Allow, Rule: x.field,
				Reason: fmt.Sprintf("excluded from the cooldown by %s", x.purl)}
		}
	}
	if req.Published.IsZero() {
		return Check{Name: CheckCooldown, Verdict: e.c.unknownAge, Rule: "cooldown.on_unknown_age",
			Reason: fmt.Sprintf("the publish time of %s is unknown, so the %s cooldown cannot be checked", pkgID(req), fmtDuration(e.c.minAge))}
	}
	now := e.now()
	age := now.Sub(req.Published)
	if age < e.c.minAge {
		when := "ago"
		if age < 0 {
			when = "in the future"
			age = -age
		}
		return Check{Name: CheckCooldown, Verdict: e.c.cooldownAction, Rule: "cooldown.min_age",
			Reason: fmt.Sprintf("%s was published %s (%s %s), inside the %s cooldown; allowed from %s",
				pkgID(req), req.Published.UTC().Format(time.RFC3339), fmtDuration(age), when, fmtDuration(e.c.minAge),
				req.Published.Add(e.c.minAge).UTC().Format(time.RFC3339))}
	}
	return Check{Name: CheckCooldown, Verdict: Allow, Rule: "cooldown.min_age",
		Reason: fmt.Sprintf("published %s, %s ago, older than the %s cooldown", req.Published.UTC().Format(time.RFC3339), fmtDuration(age), fmtDuration(e.c.minAge))}
}

// fmtDuration prints a duration rounded to minutes, with days.
func fmtDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "<1m"
	}
	days := d / (24 * time.Hour)
	rest := d % (24 * time.Hour)
	s := strings.TrimSuffix(rest.String(), "0s")
	if days == 0 {
		return s
	}
	if rest == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, s)
}

// checkProvenance decides on a version that lost the provenance earlier
// versions had; it runs only for such a version.
func (e *Engine) checkProvenance(req PackageRequest) Check {
	return Check{Name: CheckProvenance, Verdict: e.c.provenance, Rule: "provenance_loss",
		Reason: fmt.Sprintf("%s has no provenance attestations, though earlier versions had (provenance_loss: %s)", pkgID(req), e.c.provenance)}
}

func (e *Engine) checkScripts(req PackageRequest) Check {
	if !req.InstallScripts {
		return Check{Name: CheckInstallScripts, Verdict: Allow, Reason: "no install scripts reported"}
	}
	return Check{Name: CheckInstallScripts, Verdict: e.c.scripts, Rule: "install_scripts",
		Reason: fmt.Sprintf("%s runs code at install time (install_scripts: %s)", pkgID(req), e.c.scripts)}
}

// Egress decides a connection to domain (the name it was looked up as,
// empty if unknown), ip (invalid if unknown), port and proto (tcp or udp).
// Rules are tried in order and the first that matches decides: blocked
// domains, blocked CIDRs, blocked ports, DoH endpoints (on every port but
// 53, plain DNS), allowed destinations, then the default. An address of
// 0.0.0.0/8 or :: counts as loopback too (egress.Loopback): it is blocked
// when it or its loopback address is, and allowed only when both are.
func (e *Engine) Egress(domain string, ip netip.Addr, port uint16, proto string) Decision {
	c := e.c
	host := strings.TrimSuffix(strings.ToLower(domain), ".")
	ip = ip.Unmap()
	lo, isLo := egress.Loopback(ip)
	// in reports whether ip is in p, or its loopback address is.
	in := func(p netip.Prefix) bool { return p.Contains(ip) || (isLo && p.Contains(lo)) }
	dest := fmt.Sprintf("%s port %d/%s", egressDest(host, ip), port, proto)
	if host != "" {
		for _, d := range c.blockedDomains {
			if d.match(host) {
				return Decision{Verdict: Block, Rule: d.field, Reason: fmt.Sprintf("%s: domain is blocked", dest)}
			}
		}
	}
	if ip.IsValid() {
		for _, r := range c.blockedCIDRs {
			if in(r.prefix) {
				return Decision{Verdict: Block, Rule: r.field, Reason: fmt.Sprintf("%s: address is in blocked %s", dest, r.prefix)}
			}
		}
	}
	for _, r := range c.blockedPorts {
		if r.match(port, proto) {
			return Decision{Verdict: Block, Rule: r.field, Reason: fmt.Sprintf("%s: port is blocked", dest)}
		}
	}
	if port != egress.DNSPort {
		for _, r := range c.doh {
			if (r.domain != nil && host != "" && r.domain.match(host)) || (r.addr.IsValid() && (r.addr == ip || (isLo && r.addr == lo))) {
				return Decision{Verdict: c.dohAction, Rule: r.field, Reason: fmt.Sprintf("%s: DNS-over-HTTPS endpoint, whose lookups bypass the DNS record", dest)}
			}
		}
	}
	if d, ok := e.egressAllowed(host, ip, port, proto); ok {
		d.Reason = fmt.Sprintf("%s: allowed destination", dest)
		return d
	}
	return Decision{Verdict: c.egressDefault, Rule: "egress.default", Reason: fmt.Sprintf("%s: no egress rule matches; default %s", dest, c.egressDefault)}
}

// egressDest names a destination in a reason: the domain and the address,
// and for an address that counts as loopback, the loopback address.
func egressDest(host string, ip netip.Addr) string {
	dest := host
	if ip.IsValid() {
		if dest != "" {
			dest += " "
		}
		dest += ip.String()
		if lo, ok := egress.Loopback(ip); ok {
			how := "counted as"
			if ip.IsUnspecified() {
				how = "reaches"
			}
			dest += fmt.Sprintf(" (%s loopback %s)", how, lo)
		}
	}
	return dest
}

// egressAllowed decides the allowed destinations and ports of Egress: it
// returns an allow decision with its rule, and whether they allow the
// connection. An address that counts as loopback must be in an allowed
// CIDR, and so must its loopback address.
func (e *Engine) egressAllowed(host string, ip netip.Addr, port uint16, proto string) (Decision, bool) {
	c := e.c
	if len(c.allowedDomains)+len(c.allowedCIDRs)+len(c.allowedPorts) == 0 {
		return Decision{}, false
	}
	destRule := ""
	if len(c.allowedDomains)+len(c.allowedCIDRs) == 0 {
		destRule = "egress.allowed_ports"
	}
	for _, d := range c.allowedDomains {
		if host != "" && d.match(host) {
			destRule = d.field
			break
		}
	}
	allowedCIDR := func(a netip.Addr) string {
		for _, r := range c.allowedCIDRs {
			if r.prefix.Contains(a) {
				return r.field
			}
		}
		return ""
	}
	if destRule == "" && ip.IsValid() {
		destRule = allowedCIDR(ip)
		if lo, ok := egress.Loopback(ip); ok && allowedCIDR(lo) == "" {
			destRule = ""
		}
	}
	portOK := len(c.allowedPorts) == 0
	for _, r := range c.allowedPorts {
		if r.match(port, proto) {
			portOK = true
			break
		}
	}
	if destRule == "" || !portOK {
		return Decision{}, false
	}
	return Decision{Verdict: Allow, Rule: destRule}, true
}

// FileRead decides a read of path (absolute, as resolved by the caller
// against the process's working directory). A path under a sensitive_read
// prefix gets sensitive_read_action unless it is under a read exception.
// A relative path cannot be checked and gets sensitive_read_action.
func (e *Engine) FileRead(p string) Decision {
	c := e.c
	if !strings.HasPrefix(p, "/") {
		return Decision{Verdict: c.readAction, Rule: "files.sensitive_read_action", Reason: fmt.Sprintf("path %q is not absolute, so it cannot be checked", p)}
	}
	p = path.Clean(p)
	for _, r := range c.sensitive {
		if !e.under(p, r) {
			continue
		}
		for _, x := range c.readExceptions {
			if e.under(p, x) {
				return Decision{Verdict: Allow, Rule: x.field, Reason: fmt.Sprintf("%s is a routine read under %s", p, x.raw)}
			}
		}
		return Decision{Verdict: c.readAction, Rule: r.field, Reason: fmt.Sprintf("%s is under sensitive %s", p, r.raw)}
	}
	return Decision{Verdict: Allow, Reason: fmt.Sprintf("%s is not sensitive", p)}
}

// FileWrite decides a write, create, delete, rename or chmod of path. A
// path under a protected_write prefix, or a relative path, gets
// protected_write_action.
func (e *Engine) FileWrite(p string) Decision {
	c := e.c
	if !strings.HasPrefix(p, "/") {
		return Decision{Verdict: c.writeAction, Rule: "files.protected_write_action", Reason: fmt.Sprintf("path %q is not absolute, so it cannot be checked", p)}
	}
	p = path.Clean(p)
	for _, r := range c.protected {
		if e.under(p, r) {
			return Decision{Verdict: c.writeAction, Rule: r.field, Reason: fmt.Sprintf("%s is under protected %s", p, r.raw)}
		}
	}
	return Decision{Verdict: Allow, Reason: fmt.Sprintf("%s is not protected", p)}
}

// under reports whether the clean absolute path p is r or beneath it.
func (e *Engine) under(p string, r pathRule) bool {
	if r.abs != "" {
		return hasPathPrefix(p, r.abs)
	}
	home := e.home
	if home == "" {
		home = homeOf(p)
		if home == "" {
			return false
		}
	}
	return hasPathPrefix(p, path.Join(home, r.home))
}

// homeOf returns the home directory p is in when no home was configured:
// /root, or /home/USER.
func homeOf(p string) string {
	if hasPathPrefix(p, "/root") {
		return "/root"
	}
	if rest, ok := strings.CutPrefix(p, "/home/"); ok {
		user, _, _ := strings.Cut(rest, "/")
		if user != "" {
			return "/home/" + user
		}
	}
	return ""
}

func hasPathPrefix(p, prefix string) bool {
	if prefix == "/" {
		return true
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// SensitiveReads returns files.sensitive_read and files.read_exceptions as
// absolute, cleaned paths, for a recorder that watches reads beneath them:
// "~" entries are expanded against home (the argument, else the engine's
// WithHome), and left out when there is no home.
func (e *Engine) SensitiveReads(home string) (sensitive, exceptions []string) {
	if home == "" {
		home = e.home
	}
	expand := func(rules []pathRule) []string {
		var out []string
		for _, r := range rules {
			switch {
			case r.abs != "":
				out = append(out, r.abs)
			case home != "":
				out = append(out, path.Join(path.Clean(home), r.home))
			}
		}
		return out
	}
	return expand(e.c.sensitive), expand(e.c.readExceptions)
}

// Limits returns the session's default resource limits; zero fields are
// unlimited.
func (e *Engine) Limits() event.Limits { return e.c.limits }

// ExecEnv returns exec.env: the names of the environment variables whose
// values the collector records at every exec.
func (e *Engine) ExecEnv() []string { return append([]string(nil), e.c.execEnv...) }

// ToolIO returns the tool_io section: the default verbosity, the
// per-tool ones, the age recipients full I/O is sealed to and the tools
// refused.
func (e *Engine) ToolIO() ToolIO {
	t := e.c.toolIO
	t.Recipients, t.Tools, t.Refuse = slices.Clone(t.Recipients), slices.Clone(t.Tools), slices.Clone(t.Refuse)
	return t
}

// ToolVerbosity is the verbosity for the tool called name: the first
// tool_io.tools entry whose glob matches it, else tool_io.verbosity.
func (e *Engine) ToolVerbosity(name string) string {
	for _, tv := range e.c.toolIO.Tools {
		if ok, _ := path.Match(tv.Match, name); ok {
			return tv.Verbosity
		}
	}
	return e.c.toolIO.Verbosity
}

// ToolRefused reports whether tool_io.refuse refuses the tool called
// name, and by which glob.
func (e *Engine) ToolRefused(name string) (string, bool) {
	for _, g := range e.c.toolIO.Refuse {
		if ok, _ := path.Match(g, name); ok {
			return g, true
		}
	}
	return "", false
}

// Detections returns the detections section: the rule files to load
// beside the built-in rules, the rules disabled (with agent_uid0: allow,
// AgentRootRule among them) and the levels set.
func (e *Engine) Detections() Detections {
	d := e.c.detect
	d.Rules, d.Disable, d.Levels = slices.Clone(d.Rules), slices.Clone(d.Disable), maps.Clone(d.Levels)
	return d
}

// SeccompAllow returns the syscall groups that the session's seccomp filter
// lets through (sandbox.seccomp.allow), for seccomp.New; every other group
// is refused.
func (e *Engine) SeccompAllow() []string { return slices.Clone(e.c.seccompAllow) }

// Require returns the kernel collector's capabilities that the policy
// requires (require), names of event.Capabilities: a host whose kernel
// lacks one must not start.
func (e *Engine) Require() []string { return slices.Clone(e.c.require) }

// AgentUID0 decides an agent process running as uid: for uid 0 it flags
// when agent_uid0 is alert (the default), and allows when it is allow.
func (e *Engine) AgentUID0(uid uint32) Decision {
	if uid != 0 {
		return Decision{Verdict: Allow, Reason: fmt.Sprintf("agent runs as uid %d", uid)}
	}
	if e.c.uid0 == "allow" {
		return Decision{Verdict: Allow, Rule: "agent_uid0", Reason: "agent runs as uid 0, allowed by agent_uid0"}
	}
	return Decision{Verdict: Flag, Rule: "agent_uid0", Reason: "agent runs as uid 0 (root)"}
}
