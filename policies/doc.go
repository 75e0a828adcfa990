// Package policies holds the policy that the registry mirror, the shims and the
// kernel collector all obey, and the one engine that applies it.
//
// A policy is a YAML file (policies/default.yaml is the shipped default and
// is embedded as [Default]). [Load] and [Parse] read it with viper, decode it
// with UnmarshalExact and then validate every value; every problem is reported
// as a [FieldError] that names the file, the line and the field path, for
// example
//
//	policy.yaml:14: blocklist[2].purl: invalid npm range ">>1": ...
//
// [New] compiles a validated [Policy] into an [Engine]. The engine answers:
//
//   - [Engine.Package]: may this package version be installed from this source?
//     The checks run in a fixed order (blocklist, source, cooldown, install
//     scripts); the verdict is the most severe one, and the rule reported is
//     the first check that produced it.
//   - [Engine.Explain]: which version would this spec install, and what does
//     Package decide about it, check by check? (`sandtrail policy explain`;
//     the versions come from package policies/release or the caller.)
//   - [Engine.Egress]: may the sandbox connect to this domain, address and port?
//     [Engine.EgressTable], [Engine.EgressDomain] and [Engine.EgressReason]
//     give the same rules to the kernel collector, in the types of the
//     standard-library-only package policies/egress.
//   - [Engine.FileRead] and [Engine.FileWrite]: is this path sensitive to read
//     or protected against writes?
//   - [Engine.Limits], [Engine.ToolIO] and [Engine.AgentUID0]: the session's
//     resource limits, how much tool I/O to keep, and what to do when the agent
//     runs as root.
//   - [Engine.Require]: which of the kernel collector's capabilities
//     (event.Capabilities) the host must have to start.
//
// Trust model: the policy file is trusted configuration owned by root; it is
// still parsed defensively (size and complexity caps, fuzzed) because a
// mistake in it must produce an error, never a silently weaker policy. The
// requests given to the engine are untrusted (they come from the agent's side
// through shims, or from registries through the mirror): the engine never
// panics on them, and where it cannot decide (no source URL, an unparseable
// version, a relative path) it fails closed, with a reason saying so.
//
// An Engine is immutable and safe for concurrent use. To reload a policy,
// build a new Engine and swap it in.
package policies
