//go:build linux

package session

import (
	"testing"
)

func TestPasswdFor(t *testing.T) {
	host := "root:x:0:0:root:/root:/bin/bash\nsandtrail-agent:x:990:990:sandtrail agent:/nonexistent:/usr/sbin/nologin\nbob:x:1000:1000::/home/bob:/bin/sh\n"
	tests := []struct {
		name, host string
		agent      Agent
		want       string
	}{
		{"replaced", host, Agent{Name: "sandtrail-agent", GID: 990},
			"root:x:0:0:root:/root:/bin/bash\nsandtrail-agent:x:1509949441:990:sandtrail agent:/nonexistent:/usr/sbin/nologin\nbob:x:1000:1000::/home/bob:/bin/sh\n"},
		{"added", "root:x:0:0:root:/root:/bin/bash", Agent{Name: "agent", GID: 65534},
			"root:x:0:0:root:/root:/bin/bash\nagent:x:1509949441:65534:sandtrail agent:/nonexistent:/usr/sbin/nologin\n"},
		{"second line dropped", host + "sandtrail-agent:x:0:0::/:/bin/sh\n", Agent{Name: "sandtrail-agent", GID: 990},
			"root:x:0:0:root:/root:/bin/bash\nsandtrail-agent:x:1509949441:990:sandtrail agent:/nonexistent:/usr/sbin/nologin\nbob:x:1000:1000::/home/bob:/bin/sh\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(passwdFor([]byte(tt.host), &tt.agent, 1509949441)); got != tt.want {
				t.Errorf("passwdFor() = %q, want %q", got, tt.want)
			}
		})
	}
}
