package broker

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims/apt"
)

// FuzzValidate: whatever passes has no -o/-c, no path, no shell
// metacharacter, and an allowed command.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"install -y hello", "-t sid install a=1:2.0 b/c", "install -oA=B x", "update", "install ./x.deb", "install -- -c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cmd, out, err := Validate(strings.Split(s, " "))
		if err != nil {
			return
		}
		if !commands[cmd] {
			t.Fatalf("Validate(%q): command %q", s, cmd)
		}
		pkgs := false
		for _, a := range out {
			if a == "--" {
				pkgs = true
				continue
			}
			if pkgs && (strings.ContainsAny(a, "/;$`|&<>()'\" \\*?") && !strings.Contains(a, "/") || strings.HasPrefix(a, "-") || strings.HasSuffix(a, ".deb")) {
				t.Fatalf("Validate(%q) passed package %q", s, a)
			}
			if !pkgs && a != cmd && (strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "--option") || strings.HasPrefix(a, "--config")) {
				t.Fatalf("Validate(%q) passed option %q", s, a)
			}
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" : allowed
	}{
		{"plain", []string{"install", "-y", "hello"}, ""},
		{"combined short", []string{"-yqq", "install", "hello=2.10-3"}, ""},
		{"release", []string{"install", "-t", "bookworm", "hello/bookworm", "curl:amd64"}, ""},
		{"update", []string{"-q", "update"}, ""},
		{"-o", []string{"install", "-o", "x=y", "hello"}, "not allowed"},
		{"-yo", []string{"install", "-yo", "x=y", "hello"}, "not allowed"},
		{"--option=", []string{"install", "--option=APT::Update::Pre-Invoke::=id", "hello"}, "not allowed"},
		{"-c", []string{"-c/tmp/x", "install", "hello"}, "not allowed"},
		{"glob", []string{"install", "hel*"}, "not a Debian package name"},
		{"uppercase", []string{"install", "Hello"}, "not a Debian package name"},
		{"update with package", []string{"update", "xy"}, "no packages"},
		{"no packages", []string{"install", "-y"}, "needs packages"},
		{"purge", []string{"purge", "x"}, "not allowed"},
		{"source", []string{"source", "x"}, "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Validate(tt.args)
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate(%q) = %v, want %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestDebFile(t *testing.T) {
	tests := []struct {
		file, name, version string
		ok                  bool
	}{
		{"hello_2.10-3_amd64.deb", "hello", "2.10-3", true},
		{"fx-evil_1%3a1.0-1_all.deb", "fx-evil", "1:1.0-1", true},
		{"libc6_2.36-9+deb12u1_amd64.deb", "libc6", "2.36-9+deb12u1", true},
		{"hello_2.10-3_amd64.udeb", "", "", false},
		{"hello_amd64.deb", "", "", false},
		{"a_b_c_d.deb", "", "", false},
		{"Bad_1_all.deb", "", "", false},
		{"x_%zz_all.deb", "", "", false},
	}
	for _, tt := range tests {
		name, version, ok := debFile(tt.file)
		if name != tt.name || version != tt.version || ok != tt.ok {
			t.Errorf("debFile(%q) = %q, %q, %v, want %q, %q, %v", tt.file, name, version, ok, tt.name, tt.version, tt.ok)
		}
	}
}

// FuzzDebFile: a file name reads as a package or not at all, and a
// package's name is one of Debian's grammar.
func FuzzDebFile(f *testing.F) {
	for _, s := range []string{"hello_2.10-3_amd64.deb", "fx-evil_1%3a1.0-1_all.deb", "_._.deb", "a%5f_1_all.deb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, version, ok := debFile(s)
		if ok && (!pkgRe.MatchString(name) || version == "") || !ok && (name != "" || version != "") {
			t.Fatalf("debFile(%q) = %q, %q, %v", s, name, version, ok)
		}
		if reqs := uriRequests([]apt.URI{{URL: "http://127.0.0.1/" + s, File: s}}); len(reqs) != 1 || reqs[0].Name == "" && reqs[0].Source == "" {
			t.Fatalf("uriRequests(%q) = %+v, want one checkable request", s, reqs)
		}
	})
}
