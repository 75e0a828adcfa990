package session

import (
	"errors"
	"fmt"
	"github.com/sandtrail/sandtrail/record/event"
	"math"
	"strconv"
	"strings"
)

// Parsers for the kernel's text files (mountinfo and /proc/<pid>/cgroup are
// parsed by package kernel/cgroup). Their input is read from procfs and
// cgroupfs, where a process inside a session can influence some of it (for
// example the comm it puts into an OOM report), so every parser bounds its
// work, rejects what it does not understand with an error wrapping ErrParse,
// and never panics. Each has a fuzz target.

// ErrParse is wrapped by every error of the parsers in this package.
var ErrParse = errors.New("session: parse error")

// maxParseInput bounds the bytes a parser looks at.
const maxParseInput = 1 << 20

// ParseKeyed parses a flat keyed cgroup file: lines of "key value" with an
// integer value, as in memory.events, cpu.stat, pids.events and v1
// memory.oom_control. A value of "max" is returned as math.MaxInt64.
func ParseKeyed(b []byte) (map[string]int64, error) {
	if len(b) > maxParseInput {
		return nil, fmt.Errorf("%w: keyed file: %d bytes exceeds %d", ErrParse, len(b), maxParseInput)
	}
	out := map[string]int64{}
	for n, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: keyed file line %d: %d fields, want 2", ErrParse, n+1, len(f))
		}
		v, err := parseCgroupInt(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: keyed file line %d: %s: %v", ErrParse, n+1, f[0], err)
		}
		out[f[0]] = v
	}
	return out, nil
}

// parseCgroupInt parses one cgroup integer: decimal, or "max".
func parseCgroupInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return math.MaxInt64, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not an integer", event.Clip(s, 32))
	}
	return v, nil
}

// ParseSize parses a size such as "64M", "512MiB", "1.5g" or "4096" into
// bytes. Suffixes k, m, g, t (optionally followed by "b" or "ib", any case)
// are binary multiples, as in docker and systemd: "64M" and "64MB" are both
// 64 MiB. The result is positive and fits an int64.
func ParseSize(s string) (int64, error) {
	in := s
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || len(s) > 64 {
		return 0, fmt.Errorf("%w: size %q: empty or too long", ErrParse, event.Clip(in, 64))
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
		{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "+-eEx_") {
		return 0, fmt.Errorf("%w: size %q: not a number with a unit", ErrParse, in)
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil && !(whole == "" && hasFrac) {
		return 0, fmt.Errorf("%w: size %q: not a number with a unit", ErrParse, in)
	}
	if w > math.MaxInt64/mult {
		return 0, fmt.Errorf("%w: size %q: too large", ErrParse, in)
	}
	total := w * mult
	if hasFrac {
		if frac == "" || len(frac) > 9 {
			return 0, fmt.Errorf("%w: size %q: bad fraction", ErrParse, in)
		}
		f, err := strconv.ParseUint(frac, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: size %q: bad fraction", ErrParse, in)
		}
		// frac/10^len(frac) of mult, computed without overflow: mult is at
		// most 2^40 and f below 10^9, so use float for the fractional part.
		add := int64(float64(f) / math.Pow10(len(frac)) * float64(mult))
		if total > math.MaxInt64-add {
			return 0, fmt.Errorf("%w: size %q: too large", ErrParse, in)
		}
		total += add
	}
	if total <= 0 {
		return 0, fmt.Errorf("%w: size %q: must be positive", ErrParse, in)
	}
	return total, nil
}

// OOMKill is the kernel's one-line summary of an OOM kill, printed to the
// kernel log as "oom-kill:constraint=...,oom_memcg=...,task_memcg=...,
// task=...,pid=...,uid=...".
type OOMKill struct {
	Constraint string
	// OOMMemcg is the cgroup whose limit was hit; TaskMemcg is the cgroup
	// of the victim. Both are paths in the memory controller's hierarchy.
	OOMMemcg  string
	TaskMemcg string
	Task      string
	Pid       int32
	UID       uint32
}

// ParseOOMKill parses one /dev/kmsg record (with or without its
// "prio,seq,ts,flags;" prefix). ok is false, with a nil error, for a record
// that is not an oom-kill summary.
func ParseOOMKill(b []byte) (k OOMKill, ok bool, err error) {
	if len(b) > 8192 {
		return k, false, fmt.Errorf("%w: kmsg record: %d bytes", ErrParse, len(b))
	}
	msg := string(b)
	if i := strings.IndexByte(msg, ';'); i >= 0 && !strings.HasPrefix(msg, "oom-kill:") {
		msg = msg[i+1:]
	}
	msg, _, _ = strings.Cut(msg, "\n")
	rest, found := strings.CutPrefix(msg, "oom-kill:")
	if !found {
		return k, false, nil
	}
	// task= is the comm, which the victim chooses and which may contain
	// commas and "=": the kernel prints it between ",task=" and the last
	// ",pid=", so cut those from the right.
	head, tail, found := strings.Cut(rest, ",task=")
	if !found {
		return k, false, fmt.Errorf("%w: oom-kill: no task", ErrParse)
	}
	i := strings.LastIndex(tail, ",pid=")
	if i < 0 {
		return k, false, fmt.Errorf("%w: oom-kill: no pid", ErrParse)
	}
	k.Task = tail[:i]
	for _, kv := range strings.Split(tail[i+1:], ",") {
		key, val, _ := strings.Cut(kv, "=")
		switch key {
		case "pid":
			v, err := strconv.ParseInt(val, 10, 32)
			if err != nil || v <= 0 {
				return k, false, fmt.Errorf("%w: oom-kill: pid %q", ErrParse, event.Clip(val, 16))
			}
			k.Pid = int32(v)
		case "uid":
			v, err := strconv.ParseUint(val, 10, 32)
			if err != nil {
				return k, false, fmt.Errorf("%w: oom-kill: uid %q", ErrParse, event.Clip(val, 16))
			}
			k.UID = uint32(v)
		}
	}
	if k.Pid == 0 {
		return k, false, fmt.Errorf("%w: oom-kill: no pid", ErrParse)
	}
	// The head holds the constraint, a nodemask, cpuset, mems_allowed and
	// the two memcg paths, which are cgroup names and so contain no commas
	// that we create; a session's own nested cgroup could, so take the
	// memcg values between their keys.
	if j := strings.Index(head, "constraint="); j >= 0 {
		k.Constraint, _, _ = strings.Cut(head[j+len("constraint="):], ",")
	}
	if j := strings.Index(head, ",oom_memcg="); j >= 0 {
		v := head[j+len(",oom_memcg="):]
		v, _, _ = strings.Cut(v, ",task_memcg=")
		k.OOMMemcg = v
	}
	if j := strings.Index(head, ",task_memcg="); j >= 0 {
		k.TaskMemcg = head[j+len(",task_memcg="):]
	}
	return k, true, nil
}
