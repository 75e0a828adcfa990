package policies

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseSize parses a size such as "512M", "2G", "1.5Gi", "64KiB" or "1048576"
// into bytes. The multipliers K, M, G, T and P are binary (1024), as docker
// and cgroups use them, with or without a trailing "i" and "B". Empty means
// 0. Negative sizes, fractions of a byte and overflows are errors.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, unit := splitNumber(s)
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M, G, T or P suffix", s)
	}
	mult, ok := sizeUnit(unit)
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want K, M, G, T or P)", s, unit)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("size %q: %w", s, errRange(err))
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q: too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, errRange(err))
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("size %q: not a whole number of bytes", s)
	}
	return int64(v), nil
}

func sizeUnit(u string) (int64, bool) {
	u = strings.TrimSuffix(strings.ToUpper(u), "B")
	u = strings.TrimSuffix(u, "I")
	switch u {
	case "":
		return 1, true
	case "K":
		return 1 << 10, true
	case "M":
		return 1 << 20, true
	case "G":
		return 1 << 30, true
	case "T":
		return 1 << 40, true
	case "P":
		return 1 << 50, true
	}
	return 0, false
}

// splitNumber splits a leading unsigned decimal number (digits with at most
// one dot) from the rest.
func splitNumber(s string) (num, rest string) {
	i, dots, digits := 0, 0, 0
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			dots++
			if dots > 1 {
				break
			}
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits++
	}
	if digits == 0 {
		return "", s
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func errRange(err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return errors.New("out of range")
	}
	return errors.New("not a number")
}

// ParseDuration parses a Go duration ("48h", "90m", "1h30m") or a number of
// days ("2d", "1.5d", "7d12h"). Empty means 0. Negative durations are errors.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("duration %q: negative", s)
	}
	var days float64
	rest := s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		num := s[:i]
		n, tail := splitNumber(num)
		if n == "" || tail != "" {
			return 0, fmt.Errorf("duration %q: want a Go duration such as 48h or a number of days such as 2d", s)
		}
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, errRange(err))
		}
		days, rest = f, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		d, err = time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want a Go duration such as 48h or a number of days such as 2d", s)
		}
		if d < 0 {
			return 0, fmt.Errorf("duration %q: negative", s)
		}
	}
	dd := days * float64(24*time.Hour)
	if dd+float64(d) >= math.MaxInt64 {
		return 0, fmt.Errorf("duration %q: too large", s)
	}
	return time.Duration(dd) + d, nil
}

// ParseCPUs parses a number of CPUs: "2", "0.5", or Kubernetes-style
// millicores "500m". Empty means 0 (unlimited). At most 4096.
func ParseCPUs(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, unit := splitNumber(s)
	if num == "" || (unit != "" && unit != "m") {
		return 0, fmt.Errorf("cpus %q: want a number such as 0.5 or 2, or millicores such as 500m", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("cpus %q: %w", s, errRange(err))
	}
	if unit == "m" {
		f /= 1000
	}
	if f > 4096 {
		return 0, fmt.Errorf("cpus %q: more than 4096", s)
	}
	return f, nil
}

// ParseCount parses a non-negative whole number such as a pids limit. Empty
// means 0.
func ParseCount(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", s, errRange(err))
	}
	if n < 0 {
		return 0, fmt.Errorf("count %q: negative", s)
	}
	return n, nil
}

// ParseRate parses a rate in bytes per second: a size as ParseSize takes
// it, with an optional "/s" ("1M", "1MB/s": 1 MiB/s). Empty means 0.
func ParseRate(s string) (int64, error) {
	size, perSec := strings.CutSuffix(strings.TrimSpace(s), "/s")
	if perSec && size == "" {
		return 0, fmt.Errorf("rate %q: want a number with an optional K, M, G, T or P suffix", s)
	}
	n, err := ParseSize(size)
	if err != nil {
		return 0, fmt.Errorf("rate: %w", err)
	}
	return n, nil
}

// Network rate limit actions (limits.net_rate_action).
const (
	NetRateThrottle = "throttle"
	NetRateWarn     = "warn"
)

// ParseNetRateAction parses limits.net_rate_action: throttle, warn, or
// empty, which stands for throttle.
func ParseNetRateAction(s string) (string, error) {
	switch s {
	case "", NetRateThrottle, NetRateWarn:
		return s, nil
	}
	return "", fmt.Errorf("invalid value %q (want throttle, warn)", s)
}
