//go:build linux

package session

import (
	"slices"
	"testing"
)

func TestBeneathAny(t *testing.T) {
	places := []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}
	tests := []struct {
		name string
		dirs []string
		want []string
	}{
		{name: "default socket dir", dirs: []string{"/run/sandtrail"}, want: nil},
		{name: "beneath /tmp", dirs: []string{"/tmp/sandtrail-e2e-1/run"}, want: []string{"/tmp/sandtrail-e2e-1/run"}},
		{name: "cleaned once", dirs: []string{"/tmp/a/../b/", "/tmp/b"}, want: []string{"/tmp/b"}},
		{name: "a place itself is not beneath it", dirs: []string{"/tmp"}, want: nil},
		{name: "prefix is not beneath", dirs: []string{"/tmpfoo/x", "/run/locked"}, want: nil},
		{name: "escape by dot-dot", dirs: []string{"/tmp/../etc"}, want: nil},
		{name: "deep in /dev/shm", dirs: []string{"/dev/shm/a/b"}, want: []string{"/dev/shm/a/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := beneathAny(tt.dirs, places); !slices.Equal(got, tt.want) {
				t.Errorf("beneathAny(%q) = %q, want %q", tt.dirs, got, tt.want)
			}
		})
	}
}

func TestDiskFull(t *testing.T) {
	tests := []struct {
		name       string
		used, size int64
		want       bool
	}{
		{name: "empty", used: 0, size: 1 << 20, want: false},
		{name: "a page left", used: 1<<20 - 4096, size: 1 << 20, want: false},
		{name: "less than a page", used: 1<<20 - 4095, size: 1 << 20, want: true},
		{name: "full", used: 1 << 20, size: 1 << 20, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diskFull(tt.used, tt.size); got != tt.want {
				t.Errorf("diskFull(%d, %d) = %v, want %v", tt.used, tt.size, got, tt.want)
			}
		})
	}
}
