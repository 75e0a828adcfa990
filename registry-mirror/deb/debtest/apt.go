package debtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ScratchApt writes, in dir, a scratch apt of its own (state, cache, logs,
// sources.list with the line source, and an apt.conf that replaces the
// system's and its parts: none of the system's configuration applies) and
// returns the apt.conf, for APT_CONFIG. A non-empty proxy is apt's HTTP
// proxy ("DIRECT" for none). With dpkgRoot, dpkg installs beneath that
// directory (its own status and admin directory) instead of the system.
func ScratchApt(t testing.TB, dir, source, proxy, dpkgRoot string) string {
	t.Helper()
	dirs := []string{"state/lists/partial", "cache/archives/partial", "etc/trusted.gpg.d", "etc/preferences.d",
		"etc/no-parts", "log", "dl"}
	status := filepath.Join(dir, "state", "status")
	files := map[string]string{"etc/sources.list": source + "\n"}
	var extra strings.Builder
	if proxy != "" {
		fmt.Fprintf(&extra, "Acquire::http::Proxy %q;\n", proxy)
	}
	if dpkgRoot != "" {
		rel, err := filepath.Rel(dir, dpkgRoot)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("ScratchApt: the dpkg root %s must be beneath %s", dpkgRoot, dir)
		}
		for _, d := range []string{"info", "updates", "triggers"} {
			dirs = append(dirs, filepath.Join(rel, "var/lib/dpkg", d))
		}
		status = filepath.Join(dpkgRoot, "var/lib/dpkg/status")
		files[filepath.Join(rel, "var/lib/dpkg/status")] = ""
		files[filepath.Join(rel, "var/lib/dpkg/available")] = ""
		fmt.Fprintf(&extra, "DPkg::Options { \"--root=%[2]s\"; \"--admindir=%[2]s/var/lib/dpkg\"; \"--log=%[1]s/log/dpkg.log\"; };\n"+
			"DPkg::Chroot-Directory \"/\";\n", dir, dpkgRoot)
	} else {
		files["state/status"] = ""
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files["apt.conf"] = fmt.Sprintf(`Dir::Etc::main "/dev/null";
Dir::Etc::Parts "%[1]s/etc/no-parts";
Dir::State "%[1]s/state";
Dir::State::status "%[2]s";
Dir::Cache "%[1]s/cache";
Dir::Log "%[1]s/log";
Dir::Etc::SourceList "%[1]s/etc/sources.list";
Dir::Etc::SourceParts "%[1]s/etc/no-sources.d";
Dir::Etc::Trusted "%[1]s/etc/trusted.gpg";
Dir::Etc::TrustedParts "%[1]s/etc/trusted.gpg.d";
Dir::Etc::Preferences "%[1]s/etc/preferences";
Dir::Etc::PreferencesParts "%[1]s/etc/preferences.d";
Debug::NoLocking "1";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
Acquire::Retries "0";
Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
APT::Sandbox::User "root";
`, dir, status) + extra.String()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "apt.conf")
}
