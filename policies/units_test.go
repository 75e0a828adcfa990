package policies

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		err  string
	}{
		{name: "empty", in: "", want: 0},
		{name: "bytes", in: "1048576", want: 1 << 20},
		{name: "zero", in: "0", want: 0},
		{name: "kilo", in: "64K", want: 64 << 10},
		{name: "kibibytes", in: "64KiB", want: 64 << 10},
		{name: "mega", in: "512M", want: 512 << 20},
		{name: "lower case", in: "512m", want: 512 << 20},
		{name: "giga", in: "2G", want: 2 << 30},
		{name: "gibi", in: "2Gi", want: 2 << 30},
		{name: "fraction", in: "1.5G", want: 3 << 29},
		{name: "tera", in: "1T", want: 1 << 40},
		{name: "space before unit", in: "10 M", want: 10 << 20},
		{name: "bytes suffix", in: "100B", want: 100},
		{name: "unknown unit", in: "5X", err: `unknown unit "X"`},
		{name: "negative", in: "-1G", err: "want a number"},
		{name: "not a number", in: "lots", err: "want a number"},
		{name: "fraction of a byte", in: "0.1K", err: "not a whole number of bytes"},
		{name: "overflow", in: "9000000P", err: "too large"},
		{name: "integer overflow", in: "99999999999999999999", err: "out of range"},
		{name: "two dots", in: "1.2.3G", err: "unknown unit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			checkErr(t, "ParseSize", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		err  string
	}{
		{name: "empty", in: "", want: 0},
		{name: "hours", in: "48h", want: 48 * time.Hour},
		{name: "go compound", in: "1h30m", want: 90 * time.Minute},
		{name: "days", in: "2d", want: 48 * time.Hour},
		{name: "fractional days", in: "1.5d", want: 36 * time.Hour},
		{name: "days and hours", in: "7d12h", want: 7*24*time.Hour + 12*time.Hour},
		{name: "zero", in: "0", want: 0},
		{name: "negative", in: "-1h", err: "negative"},
		{name: "no unit", in: "48", err: "want a Go duration"},
		{name: "days after hours", in: "12h1d", err: "want a Go duration"},
		{name: "bare d", in: "d", err: "want a Go duration"},
		{name: "garbage", in: "soon", err: "want a Go duration"},
		{name: "too many days", in: "999999999d", err: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			checkErr(t, "ParseDuration", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCPUs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want float64
		err  string
	}{
		{name: "empty", in: "", want: 0},
		{name: "half", in: "0.5", want: 0.5},
		{name: "two", in: "2", want: 2},
		{name: "millicores", in: "500m", want: 0.5},
		{name: "too many", in: "5000", err: "more than 4096"},
		{name: "unit", in: "2G", err: "want a number"},
		{name: "negative", in: "-1", err: "want a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUs(tt.in)
			checkErr(t, "ParseCPUs", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParseCPUs(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		err  string
	}{
		{name: "empty", in: "", want: 0},
		{name: "number", in: "256", want: 256},
		{name: "negative", in: "-3", err: "negative"},
		{name: "fraction", in: "2.5", err: "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCount(tt.in)
			checkErr(t, "ParseCount", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParseCount(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func checkErr(t *testing.T, fn, in string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("%s(%q) = error %v, want no error", fn, in, err)
	case want != "" && err == nil:
		t.Fatalf("%s(%q) = no error, want error containing %q", fn, in, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("%s(%q) = error %q, want error containing %q", fn, in, err, want)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512M", "1.5Gi", "0", "", "64KiB", "9000000P", "0.1K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d, want a non-negative size", s, n)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"48h", "2d", "7d12h", "1.5d", "-1h", "", "999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, want a non-negative duration", s, d)
		}
	})
}

func FuzzParseCPUs(f *testing.F) {
	for _, s := range []string{"0.5", "2", "500m", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCPUs(s)
		if err == nil && (c < 0 || c > 4096 || c != c) {
			t.Fatalf("ParseCPUs(%q) = %v, want 0..4096", s, c)
		}
	})
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		err  string
	}{
		{name: "empty", in: "", want: 0},
		{name: "size", in: "1MB", want: 1 << 20},
		{name: "per second", in: "1MB/s", want: 1 << 20},
		{name: "bytes per second", in: "4096/s", want: 4096},
		{name: "other unit of time", in: "1M/m", err: "unknown unit"},
		{name: "only per second", in: "/s", err: "want a number"},
		{name: "negative", in: "-1M/s", err: "want a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			checkErr(t, "ParseRate", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParseRate(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}
