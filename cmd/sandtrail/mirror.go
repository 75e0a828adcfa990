package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/record/queue"
	"github.com/sandtrail/sandtrail/record/render"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/prefetch"
)

const mirrorLong = `mirror runs the verifying registry mirror alone, recording into the journal
of --data (create its key with sandtrail keys generate).

Every artifact is checked before a byte is served: npm tarballs against
dist.integrity, dist.shasum and the registry's signature (dist.signatures,
against the keys of /-/npm/v1/keys); PyPI files against the simple index's
sha256; .crate files against their sparse index line's cksum (sha256); Debian's
InRelease against its keyring, each index file against the InRelease's SHA256
and each .deb against its verified Packages entry; OCI manifests and blobs
against their digests. Artifacts are cached by their sha256
beneath <data_dir>/mirror (mirror.cache_dir), and served from the cache when
the upstream is down. The policy (--policy, config key policy) removes
blocklisted versions and versions inside the cooldown from the metadata and
refuses their direct download with 403, naming the rule. Every artifact
served or refused is a pkg.fetch event; every metadata answer the policy
changed is a pkg.filter event, once per package and session.

Clients on this host are attributed to their sessions by the kernel when a
daemon hosts the mirror (the mirror: config section); alone, the mirror
records each client's address and port.

Point npm at it with --registry http://ADDR/npm/ (or npm_config_registry),
pip with --index-url http://ADDR/pypi/simple/ (or PIP_INDEX_URL), cargo with
--config 'source.crates-io.replace-with="m"' --config
'source.m.registry="sparse+http://ADDR/crates/index/"', apt with a sources.list
line "deb http://ADDR/debian/debian bookworm main" or with -o
Acquire::http::Proxy=http://ADDR/, and an OCI client at ADDR as a plain-http
registry. Debian archives are named: deb=URL is "debian", deb/NAME=URL another,
and a value may begin with "[signed-by=KEYRING] " (default: the
debian-archive-keyring package's).
Ecosystems: ` + "%s" + `.`

func newMirrorCmd(g *globals) *cobra.Command {
	var upstreams []string
	cmd := &cobra.Command{
		Use:   "mirror [--listen ADDR] [--upstream ECOSYSTEM=URL]...",
		Short: "Run the verifying registry mirror alone",
		Long:  fmt.Sprintf(mirrorLong, strings.Join(mirror.Names(), ", ")),
		Example: `  sandtrail mirror --listen 127.0.0.1:8484
  sandtrail mirror --upstream npm=https://registry.npmjs.org/ --data /srv/sandtrail
  sandtrail mirror --upstream deb=http://deb.debian.org/debian/ --upstream deb/debian-security=http://security.debian.org/debian-security/
  npm install --registry http://127.0.0.1:8484/npm/ express`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bound here, not when the command is built: run binds the
			// policy key to its own flag.
			g.bindFlag("mirror.listen", cmd.Flags().Lookup("listen"))
			g.bindFlag("policy", cmd.Flags().Lookup("policy"))
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if err := parseUpstreams(cfg, upstreams); err != nil {
				return usageErr(err)
			}
			return runMirror(cmd.Context(), cfg, newLogger(cfg))
		},
	}
	f := cmd.Flags()
	f.String("listen", "127.0.0.1:8484", "address to serve on (config mirror.listen)")
	f.StringArrayVar(&upstreams, "upstream", nil, "ECOSYSTEM=URL or deb/NAME=URL, repeatable: an upstream registry other than the public one (config mirror.upstreams)")
	f.String("policy", "", "policy file (config key policy; default: the embedded policy)")
	cmd.AddCommand(newMirrorVerifyCacheCmd(g), newMirrorPrefetchCmd(g))
	return cmd
}

// parseUpstreams adds --upstream ECOSYSTEM=URL values to cfg. A value
// that is not of that form, names no ecosystem of the mirror, or whose URL
// is not http(s) is refused naming itself and the form; so is a second
// value for one ecosystem, which would otherwise replace the first.
func parseUpstreams(cfg *Config, flags []string) error {
	if cfg.Mirror.Upstreams == nil {
		cfg.Mirror.Upstreams = map[string]string{}
	}
	const form = "want ECOSYSTEM=URL or deb/NAME=URL, such as npm=https://registry.npmjs.org/"
	given := map[string]string{}
	for _, u := range flags {
		eco, raw, ok := strings.Cut(u, "=")
		if !ok || eco == "" || raw == "" {
			return fmt.Errorf("--upstream %q: %s (ecosystems: %s)", u, form, strings.Join(mirror.Names(), ", "))
		}
		if err := mirror.CheckUpstream(eco, raw); err != nil {
			return fmt.Errorf("--upstream %q: %v; %s", u, err, form)
		}
		if first, dup := given[eco]; dup {
			return fmt.Errorf("--upstream %q: %s has an upstream already (--upstream %s=%s); the mirror serves one upstream per ecosystem (more Debian archives as deb/NAME=URL)",
				u, eco, eco, first)
		}
		given[eco] = raw
		cfg.Mirror.Upstreams[eco] = raw
	}
	return nil
}

// runMirror serves the mirror alone until ctx ends, into the journal of
// cfg.
func runMirror(ctx context.Context, cfg *Config, log hclog.Logger) error {
	pol, err := daemon.LoadPolicy(cfg.Policy)
	if err != nil {
		return err
	}
	j, err := daemon.OpenJournal(cfg, log)
	if err != nil {
		return err
	}
	q := queue.New(j, queue.WithLogger(log), queue.WithHost(cfg.Host))
	m, err := daemon.ServeMirror(cfg, cfg.Mirror.Listen, pol, q.Emit, daemon.MirrorLinks{}, log)
	if err == nil {
		log.Info("mirror started", "url", m.URL, "journal", cfg.JournalDir(), "cache", cfg.Mirror.CacheDir)
		select {
		case <-ctx.Done():
		case err = <-m.Done():
		}
		err = errors.Join(err, m.Close())
	}
	return errors.Join(err, q.Close(), j.Close())
}

func newMirrorVerifyCacheCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify-cache",
		Short: "Re-hash every artifact in the mirror's cache and drop those that changed",
		Long: `verify-cache re-hashes every artifact in the mirror's cache (mirror.cache_dir,
default <data_dir>/mirror) and removes each whose bytes no longer hash to the
name it was stored under, so that it is fetched and verified again. It shows
its progress on a terminal and prints a summary. It exits 2 when it found a
changed artifact.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			c, err := cache.Open(cfg.Mirror.CacheDir, 0)
			if err != nil {
				return err
			}
			var progress func(done, total int)
			if term.IsTerminal(int(os.Stderr.Fd())) {
				progress = func(done, total int) { fmt.Fprintf(os.Stderr, "\rverifying %d/%d", done, total) }
			}
			start := time.Now()
			st := c.Stats()
			bad, err := c.Verify(progress)
			if progress != nil {
				fmt.Fprintln(os.Stderr)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d artifacts (%d bytes) verified in %s; %d changed and removed\n", st.Blobs, st.Bytes, time.Since(start).Round(time.Millisecond), len(bad))
			for _, b := range bad {
				fmt.Fprintf(cmd.OutOrStdout(), "  removed sha256:%s\n", b)
			}
			if len(bad) > 0 {
				return &exitError{code: exitTampered, err: fmt.Errorf("mirror verify-cache: %d artifacts had changed", len(bad))}
			}
			return nil
		},
	}
}

func newMirrorPrefetchCmd(g *globals) *cobra.Command {
	var base, format string
	cmd := &cobra.Command{
		Use:   "prefetch [--mirror URL] LOCKFILE...",
		Short: "Warm a running mirror's cache from lockfiles",
		Long: `prefetch fetches every artifact that the lockfiles name through a running
mirror (sandtrail mirror, or a daemon with a mirror: section), so that the
mirror verifies, caches and records each as it would for any client:
package-lock.json and npm-shrinkwrap.json (each registry tarball),
requirements files (*.txt, *.in: each name==version pin, with its
--hash=sha256: options) and Cargo.lock (each registry crate).

Each artifact is also checked against the hash the lockfile pins: one whose
lockfile hash differs from what the registry serves is reported. It shows
its progress on a terminal and prints a summary. It exits 0 when every
artifact was fetched, 2 when a lockfile's hash differed, and 1 when the
mirror refused or could not fetch one.`,
		Example: `  sandtrail mirror prefetch package-lock.json
  sandtrail mirror prefetch --mirror http://10.0.0.5:8484/ requirements.txt Cargo.lock`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if base == "" {
				cfg, err := g.load()
				if err != nil {
					return err
				}
				base = "http://" + cfg.Mirror.Listen + "/"
			}
			items, err := prefetchItems(args)
			if err != nil {
				return usageErr(err)
			}
			var progress func(done, total int)
			if term.IsTerminal(int(os.Stderr.Fd())) {
				progress = func(done, total int) { fmt.Fprintf(os.Stderr, "\rprefetching %d/%d", done, total) }
			}
			f := &prefetch.Fetcher{HTTP: &http.Client{Timeout: 10 * time.Minute}, Base: strings.TrimSuffix(base, "/") + "/"}
			res := f.Run(cmd.Context(), items, progress)
			if progress != nil {
				fmt.Fprintln(os.Stderr)
			}
			return writePrefetch(cmd.OutOrStdout(), format, res)
		},
	}
	cmd.Flags().StringVar(&base, "mirror", "", "the mirror's URL (default: http://<mirror.listen>/)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// prefetchItems reads the lockfiles.
func prefetchItems(files []string) ([]prefetch.Item, error) {
	var items []prefetch.Item
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		its, err := prefetch.Parse(name, b)
		if err != nil {
			return nil, err
		}
		items = append(items, its...)
	}
	return items, nil
}

// writePrefetch prints the results and returns the exit status they call
// for.
func writePrefetch(w io.Writer, format string, res []prefetch.Result) error {
	type row struct {
		Ecosystem string `json:"ecosystem"`
		Name      string `json:"name"`
		Version   string `json:"version"`
		Files     int    `json:"files"`
		Bytes     int64  `json:"bytes"`
		Error     string `json:"error,omitempty"`
	}
	rows := make([]row, 0, len(res))
	fetched, mismatched, failed := 0, 0, 0
	for _, r := range res {
		x := row{Ecosystem: r.Ecosystem, Name: r.Name, Version: r.Version, Files: r.Files, Bytes: r.Bytes}
		switch {
		case errors.Is(r.Err, prefetch.ErrLockMismatch):
			mismatched++
			x.Error = r.Err.Error()
		case r.Err != nil:
			failed++
			x.Error = r.Err.Error()
		default:
			fetched++
		}
		rows = append(rows, x)
	}
	if format == "json" {
		if err := writeJSON(w, rows); err != nil {
			return err
		}
	} else {
		for _, x := range rows {
			if x.Error != "" {
				fmt.Fprintf(w, "%s %s@%s: %s\n", x.Ecosystem, render.Clean(x.Name, 80), render.Clean(x.Version, 40), render.Clean(x.Error, 300))
			}
		}
		fmt.Fprintf(w, "%d artifacts: %d fetched through the mirror, %d whose lockfile hash differs, %d refused or failed\n", len(rows), fetched, mismatched, failed)
	}
	switch {
	case mismatched > 0:
		return &exitError{code: exitTampered, err: fmt.Errorf("mirror prefetch: %d artifacts differ from their lockfile's hash", mismatched)}
	case failed > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("mirror prefetch: %d artifacts were not fetched", failed)}
	}
	return nil
}
