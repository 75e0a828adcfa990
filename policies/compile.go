package policies

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/sealed"
	"github.com/sandtrail/sandtrail/resolver"
)

// Verdict is the outcome of a policy decision. Its home is package egress,
// which the kernel collector takes its egress table from.
type Verdict = egress.Verdict

// The verdicts, from least to most severe. They are the values of
// event.Pkg.Verdict.
const (
	Allow = egress.Allow
	Flag  = egress.Flag
	Block = egress.Block
)

// severity orders the verdicts, from Allow (0) to Block (2).
func severity(v Verdict) int {
	switch v {
	case Allow:
		return 0
	case Flag:
		return 1
	}
	return 2 // Block, and anything unexpected: fail closed.
}

// ToolIO verbosities.
const (
	VerbosityNames     = "names"
	VerbositySummaries = "summaries"
	VerbosityFull      = "full"
)

// compiled is a validated policy in the form the engine uses.
type compiled struct {
	onUnknown   Verdict
	registries  map[string][]urlPrefix
	gitHosts    []domainRule
	allowDirect bool

	block []blockRule
	// blockByName indexes the non-glob entries of block by ecosystem and
	// normalized name; blockGlobs lists the glob entries. Both hold
	// indices into block, in list order.
	blockByName map[string][]int
	blockGlobs  []int

	minAge         time.Duration
	cooldownAction Verdict
	unknownAge     Verdict
	exclude        []purlRule

	scripts Verdict
	// provenance is the verdict for a version that lost its provenance.
	provenance Verdict

	egressDefault  Verdict
	allowedDomains []domainRule
	blockedDomains []domainRule
	allowedCIDRs   []cidrRule
	blockedCIDRs   []cidrRule
	allowedPorts   []portRule
	blockedPorts   []portRule
	doh            []dohRule
	dohAction      Verdict
	unixDefault    Verdict
	unixAllowed    []string
	rawSockets     Verdict

	sensitive []pathRule
	// execEnv names the environment variables recorded at exec.
	execEnv        []string
	readExceptions []pathRule
	readAction     Verdict
	protected      []pathRule
	writeAction    Verdict

	toolIO ToolIO
	limits event.Limits
	uid0   string
	detect Detections
	// seccompAllow are the syscall groups the session filter lets through.
	seccompAllow []string
	// require names the kernel collector's capabilities that must be
	// present (event.Capabilities).
	require []string
}

type urlPrefix struct {
	scheme, host, path string // path always ends in "/"
	raw, field         string
}

type blockRule struct {
	purl          Purl
	glob          bool
	rng           string
	spec          resolver.Spec // rng parsed; nil for no range or oci
	reason, field string
}

type purlRule struct {
	purl  Purl
	field string
}

type domainRule struct {
	name     string // lower case, no trailing dot
	wildcard bool   // "*.name": any subdomain of name
	field    string
}

type cidrRule struct {
	prefix netip.Prefix
	field  string
}

type portRule struct {
	lo, hi uint16
	proto  string // "" for any
	field  string
}

type dohRule struct {
	domain *domainRule
	addr   netip.Addr
	field  string
}

type pathRule struct {
	abs   string // absolute, cleaned; or
	home  string // relative to the home directory, cleaned; "." for ~ itself
	raw   string
	field string
}

// Validate checks every value of p. It returns Errors (with field paths but
// no file or lines), or nil.
func (p *Policy) Validate() error {
	_, e := compile(p)
	return e.result("", nil)
}

func verdictField(c *errs, field, value string, def Verdict, allowed ...Verdict) Verdict {
	if value == "" {
		return def
	}
	for _, a := range allowed {
		if value == string(a) {
			return a
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	c.add(field, "invalid value %q (want %s)", value, strings.Join(names, ", "))
	return Block
}

func compile(p *Policy) (*compiled, *errs) {
	c := &errs{}
	out := &compiled{registries: map[string][]urlPrefix{}, blockByName: map[string][]int{}}
	if p.Version != 0 && p.Version != 1 {
		c.add("version", "unsupported policy version %d (want 1)", p.Version)
	}
	compileSources(c, out, p)
	compileBlocklist(c, out, p.Blocklist)
	compileCooldown(c, out, &p.Cooldown)
	out.scripts = verdictField(c, "install_scripts", p.InstallScripts, Allow, Allow, Flag, Block)
	out.provenance = verdictField(c, "provenance_loss", p.ProvenanceLoss, Allow, Allow, Flag, Block)
	compileEgress(c, out, &p.Egress)
	compileFiles(c, out, &p.Files)
	out.execEnv = execEnv(c, p.Exec.Env)
	out.toolIO = toolIO(c, &p.ToolIO)
	out.limits = limits(c, &p.Limits)
	out.uid0 = agentUID0(c, p.AgentUID0)
	out.detect = detections(c, &p.Detections, out.uid0)
	out.seccompAllow = seccompAllow(c, p.Sandbox.Seccomp.Allow)
	out.require = requireCapabilities(c, p.Require)
	return out, c
}

// compileSources compiles sources and on_unknown_source.
func compileSources(c *errs, out *compiled, p *Policy) {
	ecos := make([]string, 0, len(p.Sources.Registries))
	for eco := range p.Sources.Registries {
		ecos = append(ecos, eco)
	}
	slices.Sort(ecos)
	for _, eco := range ecos {
		field := "sources.registries." + eco
		if !knownEcosystem(eco) {
			c.add(field, "unknown ecosystem %q (want one of %s)", eco, strings.Join(Ecosystems, ", "))
			continue
		}
		for i, raw := range p.Sources.Registries[eco] {
			f := fmt.Sprintf("%s[%d]", field, i)
			u, err := parsePrefix(raw)
			if err != nil {
				c.add(f, "%v", err)
				continue
			}
			u.field = f
			out.registries[eco] = append(out.registries[eco], u)
		}
	}
	out.gitHosts = domains(c, "sources.git_hosts", p.Sources.GitHosts)
	out.allowDirect = p.Sources.AllowDirectURLs
	out.onUnknown = verdictField(c, "on_unknown_source", p.OnUnknownSource, Block, Block, Flag)
}

// compileBlocklist compiles the blocklist entries and indexes them by
// name (out.blockByName) or as globs (out.blockGlobs).
func compileBlocklist(c *errs, out *compiled, list []BlockEntry) {
	for i, b := range list {
		r, ok := blockEntry(c, fmt.Sprintf("blocklist[%d]", i), b)
		if !ok {
			continue
		}
		i := len(out.block)
		out.block = append(out.block, r)
		if r.glob {
			out.blockGlobs = append(out.blockGlobs, i)
		} else {
			k := r.purl.Type + "\x00" + r.purl.Name
			out.blockByName[k] = append(out.blockByName[k], i)
		}
	}
}

// blockEntry compiles the blocklist entry b at field f; false means that
// it is invalid and its errors are in c.
func blockEntry(c *errs, f string, b BlockEntry) (blockRule, bool) {
	if b.Purl == "" {
		c.add(f+".purl", "required")
		return blockRule{}, false
	}
	pu, err := ParsePurl(b.Purl)
	if err != nil {
		c.add(f+".purl", "%v", err)
		return blockRule{}, false
	}
	rng, rf := pu.Version, f+".purl"
	if b.Range != "" {
		if rng != "" {
			c.add(f+".range", "the purl already has a version (@%s); give one or the other", rng)
			return blockRule{}, false
		}
		rng, rf = b.Range, f+".range"
	}
	var spec resolver.Spec
	if rng != "" {
		spec, err = parseRange(pu.Type, rng)
		if err != nil {
			c.add(rf, "%v", err)
			return blockRule{}, false
		}
	}
	if strings.TrimSpace(b.Reason) == "" {
		c.add(f+".reason", "required: say why %s is blocked", b.Purl)
		return blockRule{}, false
	}
	return blockRule{purl: pu, glob: pu.IsGlob(), rng: rng, spec: spec, reason: b.Reason, field: f}, true
}

// compileCooldown compiles the cooldown section.
func compileCooldown(c *errs, out *compiled, cd *Cooldown) {
	d, err := ParseDuration(cd.MinAge)
	if err != nil {
		c.add("cooldown.min_age", "%v", err)
	}
	out.minAge = d
	out.cooldownAction = verdictField(c, "cooldown.action", cd.Action, Flag, Flag, Block)
	out.unknownAge = verdictField(c, "cooldown.on_unknown_age", cd.OnUnknownAge, Flag, Allow, Flag, Block)
	for i, raw := range cd.Exclude {
		f := fmt.Sprintf("cooldown.exclude[%d]", i)
		pu, err := ParsePurl(raw)
		if err != nil {
			c.add(f, "%v", err)
			continue
		}
		if pu.Version != "" {
			c.add(f, "an exclusion names packages, not versions: drop @%s", pu.Version)
			continue
		}
		out.exclude = append(out.exclude, purlRule{purl: pu, field: f})
	}
}

// compileEgress compiles the egress section.
func compileEgress(c *errs, out *compiled, e *Egress) {
	out.egressDefault = verdictField(c, "egress.default", e.Default, Allow, Allow, Block)
	out.dohAction = verdictField(c, "egress.doh_action", e.DoHAction, Flag, Allow, Flag, Block)
	out.allowedDomains = domains(c, "egress.allowed_domains", e.AllowedDomains)
	out.blockedDomains = domains(c, "egress.blocked_domains", e.BlockedDomains)
	out.allowedCIDRs = cidrs(c, "egress.allowed_cidrs", e.AllowedCIDRs)
	out.blockedCIDRs = cidrs(c, "egress.blocked_cidrs", e.BlockedCIDRs)
	out.allowedPorts = ports(c, "egress.allowed_ports", e.AllowedPorts)
	out.blockedPorts = ports(c, "egress.blocked_ports", e.BlockedPorts)
	out.doh = dohEndpoints(c, "egress.doh_endpoints", e.DoHEndpoints)
	out.unixDefault = verdictField(c, "egress.unix.default", e.Unix.Default, Allow, Allow, Flag, Block)
	out.rawSockets = verdictField(c, "egress.raw_sockets", e.RawSockets, Allow, Allow, Block)
	for i, raw := range e.Unix.Allowed {
		if _, err := egress.ParseUnixEntry(raw); err != nil {
			c.add(fmt.Sprintf("egress.unix.allowed[%d]", i), "%v", err)
			continue
		}
		out.unixAllowed = append(out.unixAllowed, raw)
	}
}

// dohEndpoints compiles DoH endpoints, each an address or a host name.
func dohEndpoints(c *errs, field string, raws []string) []dohRule {
	var out []dohRule
	for i, raw := range raws {
		f := fmt.Sprintf("%s[%d]", field, i)
		if a, err := netip.ParseAddr(raw); err == nil {
			out = append(out, dohRule{addr: a.Unmap(), field: f})
			continue
		}
		d, err := parseDomain(raw)
		if err != nil {
			c.add(f, "%v (want a host name or an address)", err)
			continue
		}
		d.field = f
		out = append(out, dohRule{domain: &d, field: f})
	}
	return out
}

// compileFiles compiles the files section.
func compileFiles(c *errs, out *compiled, f *Files) {
	out.sensitive = paths(c, "files.sensitive_read", f.SensitiveRead)
	out.readExceptions = paths(c, "files.read_exceptions", f.ReadExceptions)
	out.protected = paths(c, "files.protected_write", f.ProtectedWrite)
	out.readAction = verdictField(c, "files.sensitive_read_action", f.SensitiveReadAction, Flag, Flag, Block)
	out.writeAction = verdictField(c, "files.protected_write_action", f.ProtectedWriteAction, Block, Flag, Block)
}

// maxExecEnv bounds exec.env (the collector takes at most 128 names).
const maxExecEnv = 128

// execEnv compiles exec.env: environment variable names, each non-empty,
// without '=' or NUL, listed once.
func execEnv(c *errs, names []string) []string {
	if len(names) > maxExecEnv {
		c.add("exec.env", "%d names, want at most %d", len(names), maxExecEnv)
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for i, n := range names {
		f := fmt.Sprintf("exec.env[%d]", i)
		switch {
		case n == "" || strings.ContainsAny(n, "=\x00"):
			c.add(f, "invalid name %q (want a variable name, without '=' or NUL)", n)
		case seen[n]:
			c.add(f, "%q is listed twice", n)
		default:
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// toolIO compiles the tool_io section.
func toolIO(c *errs, t *ToolIO) ToolIO {
	out := ToolIO{Verbosity: t.Verbosity, Recipients: slices.Clone(t.Recipients), Tools: slices.Clone(t.Tools), Refuse: slices.Clone(t.Refuse)}
	full := false
	level := func(field, v string) string {
		switch v {
		case "":
			return VerbosityNames
		case VerbosityFull:
			full = true
		case VerbosityNames, VerbositySummaries:
		default:
			c.add(field, "invalid value %q (want names, summaries, full)", v)
		}
		return v
	}
	out.Verbosity = level("tool_io.verbosity", t.Verbosity)
	for i, tv := range t.Tools {
		field := fmt.Sprintf("tool_io.tools[%d]", i)
		if err := checkToolGlob(tv.Match); err != nil {
			c.add(field+".match", "%v", err)
		}
		if tv.Verbosity == "" {
			c.add(field+".verbosity", "missing (want names, summaries, full)")
		}
		out.Tools[i].Verbosity = level(field+".verbosity", tv.Verbosity)
	}
	for i, g := range t.Refuse {
		if err := checkToolGlob(g); err != nil {
			c.add(fmt.Sprintf("tool_io.refuse[%d]", i), "%v", err)
		}
	}
	for i, r := range t.Recipients {
		if _, err := sealed.ParseRecipient(r); err != nil {
			c.add(fmt.Sprintf("tool_io.recipients[%d]", i), "%v", err)
		}
	}
	if full && len(t.Recipients) == 0 {
		c.add("tool_io.verbosity", "full needs at least one age recipient in tool_io.recipients to seal the I/O to")
	}
	return out
}

// checkToolGlob checks a tool-name glob of tool_io.
func checkToolGlob(g string) error {
	if g == "" {
		return errors.New("empty glob")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("%q: %v", g, err)
	}
	return nil
}

// limits compiles the limits section.
func limits(c *errs, p *Limits) event.Limits {
	var l event.Limits
	var err error
	if l.MemoryBytes, err = ParseSize(p.Memory); err != nil {
		c.add("limits.memory", "%v", err)
	}
	if l.CPUs, err = ParseCPUs(p.CPUs); err != nil {
		c.add("limits.cpus", "%v", err)
	}
	if l.Pids, err = ParseCount(p.Pids); err != nil {
		c.add("limits.pids", "%v", err)
	}
	to, err := ParseDuration(p.Timeout)
	if err != nil {
		c.add("limits.timeout", "%v", err)
	}
	l.TimeoutMS = to.Milliseconds()
	if l.DiskBytes, err = ParseSize(p.Disk); err != nil {
		c.add("limits.disk", "%v", err)
	}
	if l.NetRate, err = ParseRate(p.NetRate); err != nil {
		c.add("limits.net_rate", "%v", err)
	}
	if l.NetRateAction, err = ParseNetRateAction(p.NetRateAction); err != nil {
		c.add("limits.net_rate_action", "%v", err)
	}
	return l
}

// AgentRootRule is the name of the built-in rule that alerts on a
// session whose agent runs as uid 0; agent_uid0: allow disables it.
const AgentRootRule = "agent_uid0"

// detections compiles the detections section: the levels must be Sigma's;
// whether the rules and names exist is the rule loader's to say, since
// only it knows the rules. agent_uid0: allow adds AgentRootRule to
// Disable.
func detections(c *errs, d *Detections, uid0 string) Detections {
	out := Detections{Rules: slices.Clone(d.Rules), Disable: slices.Clone(d.Disable), Levels: map[string]string{}}
	for i, r := range d.Rules {
		if r == "" {
			c.add(fmt.Sprintf("detections.rules[%d]", i), "empty path")
		}
	}
	for i, r := range d.Disable {
		if r == "" {
			c.add(fmt.Sprintf("detections.disable[%d]", i), "empty rule id")
		}
	}
	for ref, lv := range d.Levels {
		if !slices.Contains(event.AlertLevels, lv) {
			c.add("detections.levels."+ref, "invalid level %q (want %s)", lv, strings.Join(event.AlertLevels, ", "))
		}
		out.Levels[ref] = lv
	}
	if uid0 == "allow" && !slices.Contains(out.Disable, AgentRootRule) {
		out.Disable = append(out.Disable, AgentRootRule)
	}
	return out
}

// agentUID0 compiles agent_uid0: alert (the default) or allow.
func agentUID0(c *errs, v string) string {
	switch v {
	case "", "alert":
		return "alert"
	case "allow":
		return "allow"
	}
	c.add("agent_uid0", "invalid value %q (want alert, allow)", v)
	return ""
}

// seccompAllow compiles sandbox.seccomp.allow: names of syscall groups.
func seccompAllow(c *errs, allow []string) []string {
	var out []string
	for i, s := range allow {
		if _, err := seccomp.ParseGroup(s); err != nil {
			c.add(fmt.Sprintf("sandbox.seccomp.allow[%d]", i), "%v", err)
			continue
		}
		out = append(out, s)
	}
	return out
}

// requireCapabilities compiles require: names of the kernel collector's
// capabilities, each one of event.Capabilities.
func requireCapabilities(c *errs, names []string) []string {
	var out []string
	for i, n := range names {
		if !slices.Contains(event.Capabilities, n) {
			c.add(fmt.Sprintf("require[%d]", i), "unknown capability %q (want one of %s)", n, strings.Join(event.Capabilities, ", "))
			continue
		}
		out = append(out, n)
	}
	return out
}

// parseRange parses rng as a version range of ecosystem eco. For an
// ecosystem without ranges (oci) it checks that rng is a plain tag and
// returns a nil Spec.
func parseRange(eco, rng string) (resolver.Spec, error) {
	if !hasRanges(eco) {
		if strings.ContainsAny(rng, " <>=^~*,|") {
			return nil, fmt.Errorf("%s versions are tags and have no ranges: %q", eco, rng)
		}
		return nil, nil
	}
	e, err := resolver.Lookup(eco)
	if err != nil {
		return nil, fmt.Errorf("checking %s range %q: %w", eco, rng, err)
	}
	s, err := e.ParseSpec(rng)
	if err != nil {
		return nil, fmt.Errorf("invalid %s range %q: %w", eco, rng, err)
	}
	return s, nil
}

func parsePrefix(raw string) (urlPrefix, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(raw, "sparse+"), "registry+")
	u, err := url.Parse(s)
	if err != nil {
		return urlPrefix{}, fmt.Errorf("invalid URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return urlPrefix{}, fmt.Errorf("URL %q: want an http or https URL prefix", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return urlPrefix{}, fmt.Errorf("URL %q: want scheme://host/path with no user, query or fragment", raw)
	}
	return urlPrefix{scheme: u.Scheme, host: normHost(u), path: dirPath(u.Path), raw: raw}, nil
}

// normHost returns the lower-case host with the scheme's default port
// removed; an IPv6 address with a port keeps its brackets.
func normHost(u *url.URL) string {
	h, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		return h
	}
	return net.JoinHostPort(h, port)
}

// dirPath cleans p and ends it with a slash.
func dirPath(p string) string {
	p = path.Clean("/" + p)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// parseDomain parses "example.com" or "*.example.com".
func parseDomain(raw string) (domainRule, error) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	d := domainRule{}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		d.wildcard, s = true, rest
	}
	if s == "" || len(s) > 253 {
		return d, fmt.Errorf("invalid domain %q", raw)
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return d, fmt.Errorf("invalid domain %q: empty or overlong label", raw)
		}
		for _, ch := range label {
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return d, fmt.Errorf("invalid domain %q: want a host name such as example.com or *.example.com", raw)
			}
		}
	}
	d.name = s
	return d, nil
}

func (d domainRule) match(host string) bool {
	if d.wildcard {
		return strings.HasSuffix(host, "."+d.name)
	}
	return host == d.name
}

func domains(c *errs, field string, raws []string) []domainRule {
	var out []domainRule
	for i, raw := range raws {
		f := fmt.Sprintf("%s[%d]", field, i)
		d, err := parseDomain(raw)
		if err != nil {
			c.add(f, "%v", err)
			continue
		}
		d.field = f
		out = append(out, d)
	}
	return out
}

func cidrs(c *errs, field string, raws []string) []cidrRule {
	var out []cidrRule
	for i, raw := range raws {
		f := fmt.Sprintf("%s[%d]", field, i)
		s := strings.TrimSpace(raw)
		var pfx netip.Prefix
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				c.add(f, "invalid CIDR %q: %v", raw, err)
				continue
			}
			pfx = p.Masked()
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				c.add(f, "invalid CIDR %q: want a prefix such as 10.0.0.0/8 or an address", raw)
				continue
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		if pfx.Addr().Zone() != "" {
			c.add(f, "invalid CIDR %q: zones are not supported", raw)
			continue
		}
		out = append(out, cidrRule{prefix: pfx, field: f})
	}
	return out
}

func ports(c *errs, field string, raws []string) []portRule {
	var out []portRule
	for i, raw := range raws {
		f := fmt.Sprintf("%s[%d]", field, i)
		r, err := parsePort(raw)
		if err != nil {
			c.add(f, "%v", err)
			continue
		}
		r.field = f
		out = append(out, r)
	}
	return out
}

// parsePort parses "443", "443/tcp" or "8000-8100/udp".
func parsePort(raw string) (portRule, error) {
	s, proto, hasProto := strings.Cut(strings.ToLower(strings.TrimSpace(raw)), "/")
	r := portRule{}
	if hasProto {
		if proto != "tcp" && proto != "udp" {
			return r, fmt.Errorf("invalid port %q: protocol must be tcp or udp", raw)
		}
		r.proto = proto
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || l == 0 || h < l {
		return r, fmt.Errorf("invalid port %q: want 1-65535, a range such as 8000-8100, optionally /tcp or /udp", raw)
	}
	r.lo, r.hi = uint16(l), uint16(h)
	return r, nil
}

func (r portRule) match(port uint16, proto string) bool {
	return egress.PortRange{Lo: r.lo, Hi: r.hi, Proto: r.proto}.Match(port, proto)
}

func paths(c *errs, field string, raws []string) []pathRule {
	var out []pathRule
	for i, raw := range raws {
		f := fmt.Sprintf("%s[%d]", field, i)
		s := strings.TrimSpace(raw)
		r := pathRule{raw: raw, field: f}
		switch {
		case s == "~":
			r.home = "."
		case strings.HasPrefix(s, "~/"):
			r.home = path.Clean(s[2:])
			if r.home == ".." || strings.HasPrefix(r.home, "../") {
				c.add(f, "path %q leaves the home directory", raw)
				continue
			}
		case strings.HasPrefix(s, "/"):
			r.abs = path.Clean(s)
		default:
			c.add(f, "path %q: want an absolute path or one starting with ~/", raw)
			continue
		}
		out = append(out, r)
	}
	return out
}
