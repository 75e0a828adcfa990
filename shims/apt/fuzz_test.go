package apt

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

func FuzzPlan(f *testing.F) {
	for _, s := range []string{"install -y hello", "-t sid install a=1 b/c ./x.deb", "remove a+", "satisfy a (>= 1) | b", "-oA=B update", "--version"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, " ")
		p, err := Plan(args, shims.Context{})
		if err != nil {
			t.Fatal(err)
		}
		a := ParseArgs(args)
		if installCmds[a.Command] && (p == nil || len(p.Requests) == 0) {
			t.Fatalf("Plan(%q) = %+v, want an install", args, p)
		}
	})
}

func FuzzParseHook(f *testing.F) {
	f.Add(hookInput)
	f.Add("VERSION 3\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHook(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, p := range h.Pkgs {
			if p.Name == "" || p.Action == "" || strings.Contains(p.Action, " ") {
				t.Fatalf("ParseHook(%q): package %+v", s, p)
			}
		}
	})
}

func FuzzPrintURIs(f *testing.F) {
	f.Add([]byte("'http://127.0.0.1/a.deb' a.deb 3 SHA256:" + strings.Repeat("0", 64) + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		us, err := PrintURIs(b)
		if err != nil {
			return
		}
		for _, u := range us {
			if u.URL == "" || u.Size < 0 || (u.SHA256 != "" && len(u.SHA256) != 64) {
				t.Fatalf("PrintURIs(%q): %+v", b, u)
			}
		}
	})
}

func FuzzFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ReadFrame(bytes.NewReader(b))
		if err == nil && (len(got) == 0 || len(got) > MaxBrokerFrame) {
			t.Fatalf("ReadFrame(%q) = %d bytes", b, len(got))
		}
	})
}
