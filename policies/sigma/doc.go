// Package sigma evaluates Sigma detection and correlation rules over the
// sandtrail record: a stream of event.Event, in journal order.
//
// Rules are Sigma YAML (https://github.com/SigmaHQ/sigma-specification).
// Their logsource is one of sandtrail's own categories (product sandtrail:
// process, file, network, dns, package, session, limit, tool), whose
// fields are the events' JSON paths (proc.exe, net.dns.query), or one of
// SigmaHQ's three Linux categories (product linux: process_creation,
// file_event, network_connection), whose fields (Image, CommandLine,
// ParentImage, ...) are mapped onto the event as docs/sigma.md tabulates.
//
// Load validates every rule completely: an unknown or unsupported
// modifier, a field the category does not have, a condition that does not
// parse or names nothing, a regular expression that RE2 refuses, and
// every other problem is an *Error naming the file, the rule and the
// attribute. Nothing in a rule is silently ignored. Conditions are parsed
// once, at load, into a tree; values are compiled into matchers.
//
// An Evaluator consumes events in order. It keeps a bounded table of live
// processes so that SigmaHQ's Parent* fields resolve, and bounded windows
// for correlation rules (event_count, value_count, temporal), both per
// session; what its bounds drop is counted in Stats. Observe meets an
// event only with the rules of its category.
//
// Trust: rules are the operator's (root's) configuration, but are parsed
// as untrusted bytes (sizes and YAML aliases are bounded, fuzzed). Events
// are the record; fields that come from the agent's side (argv, cwd, a
// shim's package claims) are matched as the agent wrote them, so a rule
// over them detects but proves nothing about an agent that evades it.
package sigma
