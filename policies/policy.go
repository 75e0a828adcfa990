package policies

// Policy is a policy file as written: every value is kept in the file's own
// notation (durations, sizes, ranges and CIDRs as strings), so that the
// policy can be shown back exactly. [Load] validates it and [New] compiles it.
//
// A field that is absent takes its zero value, and every zero value has a
// meaning that fails closed or keeps least: an empty on_unknown_source blocks,
// an empty agent_uid0 alerts, and so on (see docs/policy.md).
type Policy struct {
	// Version is the policy format version; 0 means 1, the only one there is.
	Version int `mapstructure:"version" yaml:"version" json:"version"`
	// Sources lists where packages may come from.
	Sources Sources `mapstructure:"sources" yaml:"sources" json:"sources"`
	// OnUnknownSource is the verdict for a package from a source that is not
	// approved: block (the default) or flag.
	OnUnknownSource string `mapstructure:"on_unknown_source" yaml:"on_unknown_source" json:"on_unknown_source"`
	// Blocklist names packages, optionally with a version range, that are
	// always blocked.
	Blocklist []BlockEntry `mapstructure:"blocklist" yaml:"blocklist" json:"blocklist"`
	// Cooldown holds back releases younger than a minimum age.
	Cooldown Cooldown `mapstructure:"cooldown" yaml:"cooldown" json:"cooldown"`
	// InstallScripts is the verdict for packages that run code at install
	// time: allow (the default), flag or block.
	InstallScripts string `mapstructure:"install_scripts" yaml:"install_scripts" json:"install_scripts"`
	// ProvenanceLoss is the verdict for a version without the provenance
	// attestations that earlier versions of the package had (pnpm's
	// trustPolicy: no-downgrade): allow (the default), flag or block.
	ProvenanceLoss string `mapstructure:"provenance_loss" yaml:"provenance_loss" json:"provenance_loss"`
	// Egress decides network connections out of the sandbox.
	Egress Egress `mapstructure:"egress" yaml:"egress" json:"egress"`
	// Files names paths that are sensitive to read or protected from writes.
	Files Files `mapstructure:"files" yaml:"files" json:"files"`
	// Exec says what the record keeps of each exec beyond its identity and
	// argv.
	Exec Exec `mapstructure:"exec" yaml:"exec" json:"exec"`
	// ToolIO says how much of each tool invocation's input and output is kept.
	ToolIO ToolIO `mapstructure:"tool_io" yaml:"tool_io" json:"tool_io"`
	// Limits are the default resource limits of a session.
	Limits Limits `mapstructure:"limits" yaml:"limits" json:"limits"`
	// AgentUID0 is what happens when the agent runs as uid 0: alert (the
	// default) or allow.
	AgentUID0 string `mapstructure:"agent_uid0" yaml:"agent_uid0" json:"agent_uid0"`
	// Detections configures the detection rules run over the record.
	Detections Detections `mapstructure:"detections" yaml:"detections" json:"detections"`
	// Sandbox relaxes the hardening of the session's processes.
	Sandbox Sandbox `mapstructure:"sandbox" yaml:"sandbox" json:"sandbox"`
	// Require names capabilities of the kernel collector (the names of
	// event.Capabilities: unix_enforce, clone3_kill, ...) that must be
	// present: a host whose kernel lacks one does not start. Empty (the
	// default) requires only what the collector cannot start without.
	Require []string `mapstructure:"require" yaml:"require" json:"require"`
}

// Sandbox is the hardening of the session's processes.
type Sandbox struct {
	// Seccomp relaxes the seccomp filter that every session runs under.
	Seccomp Seccomp `mapstructure:"seccomp" yaml:"seccomp" json:"seccomp"`
}

// Seccomp relaxes the session's seccomp filter.
type Seccomp struct {
	// Allow names the syscall groups the filter lets through, out of
	// io_uring, user_namespaces, bpf, perf_event_open, userfaultfd, kexec
	// and kernel_modules (package kernel/seccomp). Every group
	// not named is refused: an empty list is the strictest filter.
	Allow []string `mapstructure:"allow" yaml:"allow" json:"allow"`
}

// Sources lists the approved package sources.
type Sources struct {
	// Registries maps an ecosystem (npm, pypi, cargo, deb, oci) to the URL
	// prefixes of its approved registries and artifact hosts. A source URL
	// matches a prefix when the scheme and host are equal and the path
	// starts with the prefix's path at a segment boundary.
	Registries map[string][]string `mapstructure:"registries" yaml:"registries" json:"registries"`
	// GitHosts are the hosts that git sources may come from: exact names,
	// or "*.example.com" for any subdomain.
	GitHosts []string `mapstructure:"git_hosts" yaml:"git_hosts" json:"git_hosts"`
	// AllowDirectURLs allows packages from any other URL (a tarball or
	// wheel named by URL, or a local file).
	AllowDirectURLs bool `mapstructure:"allow_direct_urls" yaml:"allow_direct_urls" json:"allow_direct_urls"`
}

// BlockEntry is one blocklist entry.
type BlockEntry struct {
	// Purl names the package purl-style: pkg:TYPE/[NAMESPACE/]NAME[@RANGE],
	// for example pkg:npm/lodash@<4.17.21 or pkg:npm/%40scope/name@^1. The
	// name may be a glob (pkg:npm/%40evil/*). The range uses the
	// ecosystem's own syntax; without one every version is blocked.
	Purl string `mapstructure:"purl" yaml:"purl" json:"purl"`
	// Range is the version range, as an alternative to writing it after the
	// @ in Purl.
	Range string `mapstructure:"range" yaml:"range,omitempty" json:"range,omitempty"`
	// Reason says why; it is required and shown with every block.
	Reason string `mapstructure:"reason" yaml:"reason" json:"reason"`
}

// Cooldown holds back releases that are younger than MinAge.
type Cooldown struct {
	// MinAge is the minimum release age: a Go duration, or a number of
	// days such as "2d". Empty or zero turns the cooldown off.
	MinAge string `mapstructure:"min_age" yaml:"min_age" json:"min_age"`
	// Action is the verdict for a release inside the cooldown: flag (the
	// default) or block.
	Action string `mapstructure:"action" yaml:"action" json:"action"`
	// OnUnknownAge is the verdict when the publish time is not known:
	// flag (the default), allow or block.
	OnUnknownAge string `mapstructure:"on_unknown_age" yaml:"on_unknown_age" json:"on_unknown_age"`
	// Exclude lists packages exempt from the cooldown, purl-style with
	// glob names and no version: pkg:npm/%40myorg/*.
	Exclude []string `mapstructure:"exclude" yaml:"exclude" json:"exclude"`
}

// Egress decides connections out of the sandbox. Blocked entries win over
// DoH endpoints, which win over allowed entries, which win over Default.
type Egress struct {
	// Default is the verdict for a connection no entry matches: allow (the
	// default) or block.
	Default string `mapstructure:"default" yaml:"default" json:"default"`
	// AllowedDomains and BlockedDomains are exact names or "*.suffix"
	// (any subdomain of suffix, not suffix itself).
	AllowedDomains []string `mapstructure:"allowed_domains" yaml:"allowed_domains" json:"allowed_domains"`
	BlockedDomains []string `mapstructure:"blocked_domains" yaml:"blocked_domains" json:"blocked_domains"`
	// AllowedCIDRs and BlockedCIDRs are prefixes ("10.0.0.0/8") or single
	// addresses.
	AllowedCIDRs []string `mapstructure:"allowed_cidrs" yaml:"allowed_cidrs" json:"allowed_cidrs"`
	BlockedCIDRs []string `mapstructure:"blocked_cidrs" yaml:"blocked_cidrs" json:"blocked_cidrs"`
	// AllowedPorts and BlockedPorts are ports ("443"), ranges
	// ("8000-8100"), either with an optional "/tcp" or "/udp". When
	// AllowedPorts is not empty, an allowed destination is allowed only on
	// those ports.
	AllowedPorts []string `mapstructure:"allowed_ports" yaml:"allowed_ports" json:"allowed_ports"`
	BlockedPorts []string `mapstructure:"blocked_ports" yaml:"blocked_ports" json:"blocked_ports"`
	// DoHEndpoints are DNS-over-HTTPS servers (names as in AllowedDomains,
	// or addresses). Using one hides lookups from the DNS record.
	DoHEndpoints []string `mapstructure:"doh_endpoints" yaml:"doh_endpoints" json:"doh_endpoints"`
	// DoHAction is the verdict for a connection to a DoH endpoint: flag
	// (the default), block or allow.
	DoHAction string `mapstructure:"doh_action" yaml:"doh_action" json:"doh_action"`
	// Unix decides connects and addressed sends of unix sockets.
	Unix Unix `mapstructure:"unix" yaml:"unix" json:"unix"`
	// RawSockets is allow (the default) or block: block refuses raw
	// sockets of inet and inet6, and packet sockets, to a session's
	// processes that the kernel would let create them.
	RawSockets string `mapstructure:"raw_sockets" yaml:"raw_sockets" json:"raw_sockets"`
}

// Unix decides unix socket addresses (egress.unix). The daemon's own
// sockets (ingest, apt broker) are always allowed.
type Unix struct {
	// Default is the verdict for an address Allowed does not list: allow
	// (the default), flag or block.
	Default string `mapstructure:"default" yaml:"default" json:"default"`
	// Allowed are "/dir/" (every pathname beneath dir), "/path" (that
	// pathname), "@name" (that abstract name) and "@prefix*" (abstract
	// names beginning with prefix); \xNN writes a byte.
	Allowed []string `mapstructure:"allowed" yaml:"allowed" json:"allowed"`
}

// Files names sensitive and protected paths. Entries are absolute path
// prefixes matched at component boundaries; "~/" entries are expanded
// against the agent's home directory.
type Files struct {
	// SensitiveRead are prefixes whose reads are reported.
	SensitiveRead []string `mapstructure:"sensitive_read" yaml:"sensitive_read" json:"sensitive_read"`
	// ReadExceptions are prefixes inside SensitiveRead that every program
	// reads routinely (the dynamic loader's cache, CA certificates).
	ReadExceptions []string `mapstructure:"read_exceptions" yaml:"read_exceptions" json:"read_exceptions"`
	// SensitiveReadAction is flag (the default) or block.
	SensitiveReadAction string `mapstructure:"sensitive_read_action" yaml:"sensitive_read_action" json:"sensitive_read_action"`
	// ProtectedWrite are prefixes that the agent must not modify.
	ProtectedWrite []string `mapstructure:"protected_write" yaml:"protected_write" json:"protected_write"`
	// ProtectedWriteAction is block (the default) or flag.
	ProtectedWriteAction string `mapstructure:"protected_write_action" yaml:"protected_write_action" json:"protected_write_action"`
}

// Exec says what the record keeps of each exec.
type Exec struct {
	// Env names the environment variables whose values are recorded at
	// every exec (exact, case-sensitive names), redacted like argv. Empty
	// records none.
	Env []string `mapstructure:"env" yaml:"env" json:"env"`
}

// Detections configures the Sigma rules run over the record, beside the
// built-in ones (policies/rules).
type Detections struct {
	// Rules are Sigma rule files, or directories of them (every .yml and
	// .yaml beneath), loaded with the built-in rules. They are root's
	// configuration, as the policy is.
	Rules []string `mapstructure:"rules" yaml:"rules" json:"rules"`
	// Disable names rules, by id or name, that raise no alert.
	Disable []string `mapstructure:"disable" yaml:"disable" json:"disable"`
	// Levels sets the level of a rule's alerts, by the rule's id or name:
	// informational, low, medium, high or critical.
	Levels map[string]string `mapstructure:"levels" yaml:"levels" json:"levels"`
}

// ToolIO says how much of the agent's tool I/O is kept, and which tools
// the MCP proxy refuses.
type ToolIO struct {
	// Verbosity is names (the default: tool names and statuses only),
	// summaries (redacted summaries, with the lengths and sha256 of the
	// whole) or full (summaries, and everything sealed to Recipients), for
	// every tool that no entry of Tools matches.
	Verbosity string `mapstructure:"verbosity" yaml:"verbosity" json:"verbosity"`
	// Tools sets the verbosity of the tools whose name matches a glob
	// (path.Match: * ? [..]); the first entry that matches wins. Model
	// calls match the name "model".
	Tools []ToolVerbosity `mapstructure:"tools" yaml:"tools" json:"tools"`
	// Recipients are the age public keys (age1...) that full I/O is sealed
	// to; at least one is required when any level is full.
	Recipients []string `mapstructure:"recipients" yaml:"recipients" json:"recipients"`
	// Refuse lists globs of tool names that the MCP proxy refuses: their
	// tools/call never reaches the server, and the client gets a JSON-RPC
	// error.
	Refuse []string `mapstructure:"refuse" yaml:"refuse" json:"refuse"`
}

// ToolVerbosity is one entry of tool_io.tools.
type ToolVerbosity struct {
	Match     string `mapstructure:"match" yaml:"match" json:"match"`
	Verbosity string `mapstructure:"verbosity" yaml:"verbosity" json:"verbosity"`
}

// Limits are a session's default resource limits, as human strings. Empty
// or "0" means unlimited.
type Limits struct {
	// Memory is a size: "512M", "2G", "1.5Gi" (binary multiples).
	Memory string `mapstructure:"memory" yaml:"memory" json:"memory"`
	// CPUs is a number of CPUs: "0.5", "2", or millicores "500m".
	CPUs string `mapstructure:"cpus" yaml:"cpus" json:"cpus"`
	// Pids is the maximum number of processes: "256".
	Pids string `mapstructure:"pids" yaml:"pids" json:"pids"`
	// Timeout is the session's wall-clock limit: "10m", "2h", "1d".
	Timeout string `mapstructure:"timeout" yaml:"timeout" json:"timeout"`
	// Disk is a size, as Memory.
	Disk string `mapstructure:"disk" yaml:"disk" json:"disk"`
	// NetRate is a size per second, as Memory ("1M": 1 MiB/s), each way.
	NetRate string `mapstructure:"net_rate" yaml:"net_rate" json:"net_rate"`
	// NetRateAction is throttle (the default) or warn: over the rate,
	// drop packets, or only record limit.hit events.
	NetRateAction string `mapstructure:"net_rate_action" yaml:"net_rate_action" json:"net_rate_action"`
}

// Effective returns a copy of p with every empty setting replaced by the
// value it stands for (an empty on_unknown_source is block, and so on), so
// that showing it tells the whole truth. Lists and maps are shared with p.
func (p *Policy) Effective() *Policy {
	q := *p
	set := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	if q.Version == 0 {
		q.Version = 1
	}
	set(&q.OnUnknownSource, string(Block))
	set(&q.Cooldown.Action, string(Flag))
	set(&q.Cooldown.OnUnknownAge, string(Flag))
	set(&q.InstallScripts, string(Allow))
	set(&q.ProvenanceLoss, string(Allow))
	set(&q.Egress.Default, string(Allow))
	set(&q.Egress.DoHAction, string(Flag))
	set(&q.Egress.Unix.Default, string(Allow))
	set(&q.Egress.RawSockets, string(Allow))
	set(&q.Files.SensitiveReadAction, string(Flag))
	set(&q.Files.ProtectedWriteAction, string(Block))
	set(&q.ToolIO.Verbosity, VerbosityNames)
	set(&q.AgentUID0, "alert")
	return &q
}
