package apt

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []shims.Request // nil: no install intent
	}{
		{name: "version", args: []string{"--version"}},
		{name: "update", args: []string{"-q", "update"}},
		{name: "list", args: []string{"list", "--installed"}},
		{name: "remove", args: []string{"remove", "hello"}},
		{name: "install", args: []string{"install", "-y", "hello"}, want: []shims.Request{{Name: "hello", Origin: "argv"}}},
		{name: "glob", args: []string{"install", "-y", "netcat-trad*"}, want: []shims.Request{
			{Name: "netcat-trad*", Origin: "argv"}, {Source: "apt-pattern:netcat-trad*", Origin: "argv pattern netcat-trad*"}}},
		{name: "pin", args: []string{"install", "hello=2.10-3", "curl:amd64"}, want: []shims.Request{
			{Name: "hello", Spec: "=2.10-3", Exact: "2.10-3", Origin: "argv"}, {Name: "curl", Origin: "argv"}}},
		{name: "release", args: []string{"install", "hello/bookworm-backports"}, want: []shims.Request{{Name: "hello", Registry: "bookworm-backports", Origin: "argv"}}},
		{name: "-t", args: []string{"-t", "sid", "install", "hello"}, want: []shims.Request{{Name: "hello", Registry: "sid", Origin: "argv"}}},
		{name: "--target-release=", args: []string{"install", "--target-release=sid", "hello"}, want: []shims.Request{{Name: "hello", Registry: "sid", Origin: "argv"}}},
		{name: "-o value is not a package", args: []string{"install", "-o", "Debug::x=1", "-oA=b", "-c", "f.conf", "hello"}, want: []shims.Request{{Name: "hello", Origin: "argv"}}},
		{name: "local deb", args: []string{"install", "./x.deb", "/tmp/y.deb"}, want: []shims.Request{{Source: "./x.deb", Origin: "argv"}, {Source: "/tmp/y.deb", Origin: "argv"}}},
		{name: "fix broken", args: []string{"-f", "install"}, want: []shims.Request{{Origin: "argv"}}},
		{name: "upgrade", args: []string{"full-upgrade", "-y"}, want: []shims.Request{{Origin: "argv"}}},
		{name: "remove with install suffix", args: []string{"remove", "a", "b+"}, want: []shims.Request{{Name: "b", Origin: "argv"}}},
		{name: "satisfy", args: []string{"satisfy", "a (>= 1.0), b | c"}, want: []shims.Request{
			{Name: "a", Spec: ">= 1.0", Origin: "argv"}, {Name: "b", Origin: "argv"}, {Name: "c", Origin: "argv"}}},
		{name: "unknown command", args: []string{"frobnicate", "x"}, want: []shims.Request{{Name: "x", Origin: "argv"}}},
		{name: "after --", args: []string{"install", "--", "-weird"}, want: []shims.Request{{Name: "-weird", Origin: "argv"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(tt.args, shims.Context{Mirror: "http://127.0.0.1:8480"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if p != nil {
					t.Errorf("Plan(%q) = %+v, want no install intent", tt.args, p)
				}
				return
			}
			if p == nil || !reflect.DeepEqual(p.Requests, tt.want) {
				t.Fatalf("Plan(%q) = %+v, want requests %+v", tt.args, p, tt.want)
			}
			if p.Args[0] != "-o" || p.Args[1] != "Acquire::http::Proxy=http://127.0.0.1:8480/" {
				t.Errorf("Plan(%q).Args = %q, want the mirror as proxy first", tt.args, p.Args)
			}
		})
	}
}

const hookInput = `VERSION 3
APT::Architecture=amd64
DPkg::Pre-Install-Pkgs::=x

hello - - none < 2.10-3 amd64 same DEB
old 1.0 amd64 none = 1.0 amd64 none **CONFIGURE**
gone 1.0 amd64 none > - - none **REMOVE**
`

func TestRunHook(t *testing.T) {
	dir := t.TempDir()
	deb := filepath.Join(dir, "hello_2.10-3_amd64.deb")
	os.WriteFile(deb, []byte("abc"), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	if err := RunHook(strings.NewReader(strings.Replace(hookInput, "DEB", deb, 1)), out); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(out)
	defer f.Close()
	recs, err := ReadHookRecords(f)
	want := []HookRecord{{Name: "hello", Version: "2.10-3", Arch: "amd64", Deb: deb, SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}
	if err != nil || !reflect.DeepEqual(recs, want) {
		t.Errorf("RunHook wrote %+v, %v, want %+v", recs, err, want)
	}
	if err := RunHook(strings.NewReader(strings.Replace(hookInput, "DEB", filepath.Join(dir, "missing.deb"), 1)), out); err == nil {
		t.Errorf("RunHook with a missing .deb succeeded, want an error (it aborts the install)")
	}
	os.Symlink(out, filepath.Join(dir, "link"))
	if err := RunHook(strings.NewReader(strings.Replace(hookInput, "DEB", deb, 1)), filepath.Join(dir, "link")); err == nil {
		t.Errorf("RunHook through a symlink succeeded, want a refusal")
	}
}

func TestParseHookErrors(t *testing.T) {
	for _, in := range []string{"", "VERSION 2\n\n", "VERSION 3\n\nhello - - none\n", "VERSION 3\n\na b c d ? e f g h\n"} {
		if _, err := ParseHook(strings.NewReader(in)); err == nil {
			t.Errorf("ParseHook(%q) = nil error, want one", in)
		}
	}
}

func TestPrintURIs(t *testing.T) {
	out := "'http://127.0.0.1:1/debian/pool/main/h/hello/hello_2.10-3_amd64.deb' hello_2.10-3_amd64.deb 1234 SHA256:" + strings.Repeat("AB", 32) + "\n" +
		"W: some warning\n'http://127.0.0.1:1/x.deb' x_1_all.deb 5 MD5Sum:00\n"
	got, err := PrintURIs([]byte(out))
	want := []URI{{URL: "http://127.0.0.1:1/debian/pool/main/h/hello/hello_2.10-3_amd64.deb", File: "hello_2.10-3_amd64.deb", Size: 1234, SHA256: strings.Repeat("ab", 32)},
		{URL: "http://127.0.0.1:1/x.deb", File: "x_1_all.deb", Size: 5}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PrintURIs = %+v, %v, want %+v", got, err, want)
	}
	for _, bad := range []string{"'unterminated", "'u' f", "'u' f -1 SHA256:00"} {
		if _, err := PrintURIs([]byte(bad)); err == nil {
			t.Errorf("PrintURIs(%q) = nil error, want one", bad)
		}
	}
}

func TestFrames(t *testing.T) {
	var b bytes.Buffer
	WriteFrame(&b, []byte(`{"exit":3}`))
	got, err := ReadFrame(&b)
	if err != nil || string(got) != `{"exit":3}` {
		t.Errorf("ReadFrame = %q, %v", got, err)
	}
	if err := WriteFrame(&b, make([]byte, MaxBrokerFrame+1)); err == nil {
		t.Errorf("WriteFrame of an oversized frame succeeded")
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0xff, 0, 0, 0})); err == nil {
		t.Errorf("ReadFrame of an oversized header succeeded")
	}
}
