package broker

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadStatus(t *testing.T) {
	const status = `Package: figlet
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 2.2.5-3+b1
Description: Make large character ASCII banners out of ordinary text
 FIGlet is a program for making large letters out of ordinary text.
 .
 Package: not-a-field
Conffiles:
 /etc/figlet.conf 0123456789abcdef

Package: cowsay
Status: install ok unpacked
Architecture: all
Version: 3.03+dfsg2-8

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1

Package: Bad_Name
Status: install ok installed
Architecture: amd64
Version: 1

Package: spaced
Status: install ok installed
Architecture: amd64
Version: 1 2

Package: nostatus
Architecture: amd64
Version: 1
`
	got, err := ReadStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Installed{
		"figlet:amd64": {Name: "figlet", Arch: "amd64", Version: "2.2.5-3+b1", State: "installed"},
		"cowsay:all":   {Name: "cowsay", Arch: "all", Version: "3.03+dfsg2-8", State: "unpacked"},
		"gone:amd64":   {Name: "gone", Arch: "amd64", Version: "1.0-1", State: "config-files"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadStatus = %+v, want %+v", got, want)
	}
	for k, on := range map[string]bool{"figlet:amd64": true, "cowsay:all": true, "gone:amd64": false} {
		if got[k].OnDisk() != on {
			t.Errorf("%s: OnDisk() = %v, want %v", k, !on, on)
		}
	}
	if _, err := ReadStatus(strings.NewReader("Package: x\nDescription: " + strings.Repeat("a", maxStatusLine+1) + "\n")); !errors.Is(err, ErrStatus) {
		t.Errorf("ReadStatus(a line too long) = %v, want ErrStatus", err)
	}
}

// FuzzReadStatus: ReadStatus never panics, and whatever it returns is keyed
// by its own name and arch, of the characters they may have.
func FuzzReadStatus(f *testing.F) {
	f.Add([]byte("Package: figlet\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.2.5-3+b1\n\nPackage: x\n y\n"))
	f.Add([]byte("Package: a\r\nStatus: a b c\r\nArchitecture: all\r\nVersion: 1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ReadStatus(strings.NewReader(string(b)))
		if err != nil {
			if !errors.Is(err, ErrStatus) {
				t.Fatalf("ReadStatus error %v does not wrap ErrStatus", err)
			}
			return
		}
		for k, i := range st {
			if k != i.Name+":"+i.Arch || !validInstalled(i) || strings.ContainsAny(i.Name+i.Arch, ":/ \t\r\n") {
				t.Fatalf("ReadStatus(%q) gave %q: %+v", b, k, i)
			}
		}
	})
}
