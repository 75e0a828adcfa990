package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// This file describes a kernel collector's capabilities (event.Kernel, the
// payload of collector.capabilities) for people: the one line that names
// what it runs without, which run's summary, doctor and the event's own
// summary share (KernelWithout, KernelLine), why a required capability
// stops it (Requirement), and the nearest configuration in which it runs
// (Unmet, Nearest).

// KernelWithout names what the kernel collector runs without on the kernel
// k describes, in one line: "6.1.0-50-cloud-amd64: without unix_enforce,
// clone3_kill". It returns "" when k lacks nothing, or is nil.
func KernelWithout(k *event.Kernel) string {
	if k == nil {
		return ""
	}
	var without []string
	for _, c := range k.Capabilities {
		if !c.Have {
			without = append(without, Clean(c.Name, 40))
		}
	}
	if len(without) == 0 {
		return ""
	}
	return Clean(k.Release, 80) + ": without " + strings.Join(without, ", ")
}

// KernelLine is KernelWithout, or for a kernel that lacks nothing its
// release and "every capability": "6.18.0: every capability".
func KernelLine(k *event.Kernel) string {
	if s := KernelWithout(k); s != "" {
		return s
	}
	return Clean(k.Release, 80) + ": every capability"
}

// Requirement says why the capability name, which k lacks, is needed and
// when Linux has it: "unix_enforce: unix-socket enforcement needs Linux
// 6.7; recording connects from syscalls instead (Linux 6.7+; this kernel
// is 6.1.0-50-cloud-amd64)". It names a capability that k does not list
// as "not probed".
func Requirement(k *event.Kernel, name string) string {
	c, ok := capability(k, name)
	detail := "not available"
	switch {
	case !ok:
		detail = "not probed"
	case c.Detail != "":
		detail = Clean(c.Detail, 200)
	}
	var when []string
	if c.Since != "" {
		when = append(when, "Linux "+Clean(c.Since, 16)+"+")
	}
	when = append(when, "this kernel is "+Clean(k.Release, 80))
	return fmt.Sprintf("%s: %s (%s)", Clean(name, 40), detail, strings.Join(when, "; "))
}

// Unmet returns the capabilities that k lacks and that sandtrail cannot run
// without: the collector's required ones, in k's order, then those of
// require (a policy's require list) that are not among them, in require's
// order. A name of require that k does not list is unmet.
func Unmet(k *event.Kernel, require []string) []string {
	var out []string
	for _, c := range k.Capabilities {
		if c.Required && !c.Have {
			out = append(out, c.Name)
		}
	}
	for _, n := range k.Missing(require) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Nearest says in a sentence what the nearest configuration is in which
// sandtrail runs on the kernel k, with the capabilities of require (a
// policy's require list) as well as the collector's required ones. With
// every one present it counts the fallbacks: "all required capabilities
// present: sandtrail runs with 2 fallbacks (btf_cast, unix_enforce)". With
// some unmet (Unmet) it names the newest Linux that they need, and those
// that no release gives: "needs Linux 5.17 (bpf_loop); and btf (no
// /sys/kernel/btf/vmlinux)"; when only the policy requires them, a policy
// that does not is the other way: "needs Linux 6.7 (unix_enforce), or a
// policy that does not require unix_enforce".
func Nearest(k *event.Kernel, require []string) string {
	unmet := Unmet(k, require)
	if len(unmet) == 0 {
		return fallbacks(k)
	}
	var newest string
	var versioned, other, policyOnly []string
	for _, n := range unmet {
		c, ok := capability(k, n)
		name := Clean(n, 40)
		if !c.Required {
			policyOnly = append(policyOnly, name)
		}
		switch {
		case ok && c.Since != "":
			versioned = append(versioned, name)
			if newest == "" || olderRelease(newest, c.Since) {
				newest = c.Since
			}
		case ok && c.Detail != "":
			other = append(other, fmt.Sprintf("%s (%s)", name, Clean(c.Detail, 200)))
		case ok:
			other = append(other, name)
		default:
			other = append(other, name+" (not probed)")
		}
	}
	var needs []string
	if newest != "" {
		needs = append(needs, fmt.Sprintf("Linux %s (%s)", Clean(newest, 16), strings.Join(versioned, ", ")))
	}
	s := "needs " + strings.Join(append(needs, other...), "; and ")
	if len(policyOnly) == len(unmet) {
		s += ", or a policy that does not require " + strings.Join(policyOnly, ", ")
	}
	return s
}

// fallbacks is Nearest for a kernel that has every capability sandtrail
// needs: how many it does without.
func fallbacks(k *event.Kernel) string {
	var names []string
	for _, c := range k.Capabilities {
		if !c.Have {
			names = append(names, Clean(c.Name, 40))
		}
	}
	switch len(names) {
	case 0:
		return "every capability present: sandtrail runs with no fallbacks"
	case 1:
		return "all required capabilities present: sandtrail runs with 1 fallback (" + names[0] + ")"
	}
	return fmt.Sprintf("all required capabilities present: sandtrail runs with %d fallbacks (%s)", len(names), strings.Join(names, ", "))
}

// capability returns the entry of k named name.
func capability(k *event.Kernel, name string) (event.Capability, bool) {
	for _, c := range k.Capabilities {
		if c.Name == name {
			return c, true
		}
	}
	return event.Capability{}, false
}

// olderRelease reports whether the Linux release a ("5.17") is older than
// b ("6.7"), comparing their dotted numbers; a part that is not a number
// counts as 0.
func olderRelease(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
