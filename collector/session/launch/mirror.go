package launch

import (
	"net/url"
	"strings"
)

// MirrorVar names the mirror a session's package managers are pointed at;
// the shims read it.
const MirrorVar = "SANDTRAIL_MIRROR"

// MirrorEnv is the environment that points every package manager that a
// session may run, and that the mirror at mirror ("http://127.0.0.1:8484")
// serves, at that mirror. It is the one list of them; the host adds it to
// every session's environment (daemon).
//
//   - npm and pnpm: npm_config_registry (pnpm reads npm's variables);
//   - yarn 1: YARN_REGISTRY; yarn 2+ (berry): YARN_NPM_REGISTRY_SERVER, and
//     YARN_UNSAFE_HTTP_WHITELIST with the mirror's host, without which berry
//     refuses a registry over http;
//   - bun: BUN_CONFIG_REGISTRY and NPM_CONFIG_REGISTRY;
//   - corepack: COREPACK_NPM_REGISTRY (without the trailing slash: it
//     appends "/<name>/<version>"), for its downloads of pnpm, yarn and npm
//     themselves;
//   - pip: PIP_INDEX_URL, and PIP_TRUSTED_HOST for a mirror that is not on
//     loopback (pip ignores an http index elsewhere);
//   - uv: UV_DEFAULT_INDEX, and UV_INDEX_URL for uv before 0.4.23;
//   - cargo: CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse. Its source
//     replacement is not settable by environment (CARGO_SOURCE_… is not
//     read), and a ~/.cargo/config.toml replacing crates.io by the mirror
//     makes the cargo shim's own --config fail ("source … is already
//     defined"): the cargo shim points cargo at the mirror (--config).
//
// poetry is not redirected: it reads no index from the environment, and
// PyPI stays its source unless the project names a primary one (`poetry
// source add --priority=primary`).
func MirrorEnv(mirror string) []string {
	m := strings.TrimSuffix(mirror, "/")
	npm, pypi := m+"/npm/", m+"/pypi/simple/"
	env := []string{
		MirrorVar + "=" + m,
		"npm_config_registry=" + npm,
		"YARN_REGISTRY=" + npm,
		"YARN_NPM_REGISTRY_SERVER=" + npm,
		"BUN_CONFIG_REGISTRY=" + npm,
		"NPM_CONFIG_REGISTRY=" + npm,
		"COREPACK_NPM_REGISTRY=" + m + "/npm",
		"PIP_INDEX_URL=" + pypi,
		"UV_DEFAULT_INDEX=" + pypi,
		"UV_INDEX_URL=" + pypi,
		"CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse",
	}
	if u, err := url.Parse(m); err == nil && u.Hostname() != "" {
		env = append(env, "YARN_UNSAFE_HTTP_WHITELIST="+u.Hostname())
		if !loopbackHost(u.Hostname()) {
			env = append(env, "PIP_TRUSTED_HOST="+u.Host)
		}
	}
	return env
}

// loopbackHost reports whether pip counts host as a secure origin on its
// own: localhost, 127.0.0.0/8 and ::1.
func loopbackHost(host string) bool {
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}
