package policies

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestCheckAgeRecipient(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  string
	}{
		{name: "x25519", in: "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2"},
		{name: "one character changed", in: "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh3", err: "bad checksum"},
		{name: "upper case", in: "AGE186W5AZXWYCW5ZP5SKP77SLVSMF7JMCFTW2MM7RLP4HWQER4YJDTQEXGNH2", err: "lower case"},
		{name: "identity", in: "AGE-SECRET-KEY-1DR36PCANDYE628SRM32YNYRCZ4MWS34D27D3ATR0C3VZTCK7NMPQ3RFZTZ", err: "secret key"},
		{name: "ssh key", in: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA", err: "not an age recipient"},
		{name: "empty", in: "", err: "not an age recipient"},
		{name: "bad character", in: "age1bbbbbbbbbbb", err: "bad character"},
		{name: "other prefix", in: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", err: "want age1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "checkAgeRecipient", tt.in, checkAgeRecipient(tt.in), tt.err)
		})
	}
}

// TestAgeKeygenRecipients checks recipients made by the real age-keygen:
// the ones saved in testdata, and fresh ones when age-keygen is installed.
func TestAgeKeygenRecipients(t *testing.T) {
	f, err := os.Open("testdata/age-recipients.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			rs = append(rs, s)
		}
	}
	if len(rs) == 0 {
		t.Fatal("testdata/age-recipients.txt is empty")
	}
	if bin, err := exec.LookPath("age-keygen"); err == nil {
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("age-keygen: %v", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(line, "# public key: "); ok {
				rs = append(rs, r)
			}
		}
	} else {
		t.Log("age-keygen not installed (apt-get install age); checking the saved recipients only")
	}
	for _, r := range rs {
		if err := checkAgeRecipient(r); err != nil {
			t.Errorf("checkAgeRecipient(%q) = %v, want nil", r, err)
		}
	}
}

func FuzzCheckAgeRecipient(f *testing.F) {
	f.Add("age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2")
	f.Add("age1yubikey1qwerty")
	f.Add("AGE-SECRET-KEY-1X")
	f.Fuzz(func(t *testing.T, s string) {
		_ = checkAgeRecipient(s)
	})
}
