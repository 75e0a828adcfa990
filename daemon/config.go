// Package daemon runs sandtrail's recording in one process: the journal (its
// one writer), the event queue in front of it, the session manager, the
// eBPF collector, the DNS proxy, and when asked the ingest server, the
// index follower (with the retention policy over the index and the
// journal, retention.go) and the verifying mirror. `sandtrail daemon` runs one for
// the machine; `sandtrail run` runs one for its own session when no daemon
// is running. Config is the typed configuration both are given.
//
// Trust model: a Daemon runs as root. Everything it records comes from its
// parts, each of which attributes events to sessions by the kernel (cgroup
// ids, peer credentials, sock_diag), never by what a session claims.
package daemon

import (
	"path/filepath"
	"time"
)

// Config is the typed configuration shared by the daemon and the CLI.
type Config struct {
	// DataDir holds the journal, the index and the keys.
	DataDir string `mapstructure:"data_dir"`
	// Socket is the ingest socket the daemon serves.
	Socket string `mapstructure:"socket"`
	// KeyFile is the checkpoint signing key (note signer format, 0600).
	KeyFile string `mapstructure:"key_file"`
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string `mapstructure:"log_level"`
	// Host names this machine in events; empty means the hostname.
	Host string `mapstructure:"host"`
	// Origin is the checkpoint origin line.
	Origin string `mapstructure:"origin"`
	// Store is the record store that the read commands (query, sessions,
	// timeline, packages, alerts, report, export) read: empty for the data
	// directory's index, or the postgres:// URL of a central store that
	// `sandtrail aggregate` writes.
	Store string `mapstructure:"store"`
	// Policy is the policy file the host enforces and records with (egress,
	// sensitive files, blocked domains, default limits); empty means the
	// embedded default policy.
	Policy string `mapstructure:"policy"`
	// ShimDir is the package-manager shims' directory, first on every
	// session's PATH (install.sh links them in launch.ShimDir).
	ShimDir    string           `mapstructure:"shim_dir"`
	Checkpoint CheckpointConfig `mapstructure:"checkpoint"`
	Ingest     IngestConfig     `mapstructure:"ingest"`
	DNS        DNSConfig        `mapstructure:"dns"`
	Mirror     MirrorConfig     `mapstructure:"mirror"`
	Retention  RetentionConfig  `mapstructure:"retention"`
	API        APIConfig        `mapstructure:"api"`
	// Sinks stream the record out as it is journaled.
	Sinks []SinkConfig `mapstructure:"sinks"`
}

// MirrorConfig configures the verifying registry mirror.
type MirrorConfig struct {
	// Enabled makes the daemon host the mirror; a mirror: section in the
	// config file sets it. `sandtrail run` hosts one for its sessions
	// whenever it hosts them itself, on 127.0.0.1 and a free port.
	Enabled bool `mapstructure:"enabled"`
	// Listen is the daemon's (and `sandtrail mirror`'s) address.
	Listen string `mapstructure:"listen"`
	// Upstreams maps an ecosystem to its upstream registry; the public
	// registries by default. deb/NAME names a further Debian archive
	// (deb/debian-security), served at /debian/NAME/.
	Upstreams map[string]string `mapstructure:"upstreams"`
	// CacheDir holds the cache; empty means <data_dir>/mirror.
	CacheDir string `mapstructure:"cache_dir"`
	// CacheMax bounds the cache's artifacts, e.g. 20G; empty: unbounded.
	CacheMax string `mapstructure:"cache_max"`
	// MetaTTL is how long metadata is served from the cache.
	MetaTTL time.Duration `mapstructure:"meta_ttl"`
}

// DNSConfig configures the DNS proxy that answers the sessions' lookups.
type DNSConfig struct {
	// Enabled runs the proxy and redirects every session's port-53
	// traffic to it.
	Enabled bool `mapstructure:"enabled"`
	// Upstream lists the resolvers the proxy forwards to (IP addresses
	// with optional ports); empty means the nameservers of
	// /etc/resolv.conf.
	Upstream []string `mapstructure:"upstream"`
	// Timeout bounds one upstream exchange.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxSessions bounds the sessions with their own proxy listeners.
	MaxSessions int `mapstructure:"max_sessions"`
}

// IngestConfig configures the daemon's ingest socket and its clients.
type IngestConfig struct {
	// SocketMode is the socket file's mode, in octal. Attribution by
	// peer credentials, not the mode, decides what a peer may send.
	SocketMode string `mapstructure:"socket_mode"`
	// MaxConns caps concurrent connections; an eighth is reserved for
	// root outside sessions.
	MaxConns int `mapstructure:"max_conns"`
	// MaxConnsPerPeer caps the connections of one peer: a session, or a
	// uid outside sessions (not root). 0 removes this cap.
	MaxConnsPerPeer int `mapstructure:"max_conns_per_peer"`
	// DedupSize is how many journaled event ids are remembered (and loaded
	// from the journal's tail at start) to drop replayed events.
	DedupSize int `mapstructure:"dedup_size"`
	// IdleTimeout closes connections that send nothing for this long.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// DrainTimeout bounds the graceful shutdown of connections.
	DrainTimeout time.Duration `mapstructure:"drain_timeout"`
	// StatsInterval is how often the daemon logs the ingest counters
	// when they changed; 0 logs them only at shutdown.
	StatsInterval time.Duration `mapstructure:"stats_interval"`
	// SpoolDir is where `sandtrail emit` keeps events the daemon could not
	// take; empty means <data_dir>/spool.
	SpoolDir string `mapstructure:"spool_dir"`
}

// RetentionConfig is the retention policy (docs/retention.md): how long
// the index and the journal keep what ended sessions did.
type RetentionConfig struct {
	// HotDays is the hot window: sessions that ended more than HotDays
	// days ago, and entries of no session older than that, are pruned
	// from the index (rows deleted) and the journal (tombstones that keep
	// the Merkle tree). 0 turns retention off. Default 90.
	HotDays int `mapstructure:"hot_days"`
	// Interval is how often the daemon applies it (default 24h; the
	// first run is a minute after it starts, or Interval when shorter).
	Interval time.Duration `mapstructure:"interval"`
	// Archive is the cold tier: a directory, or an OCI repository
	// (registry.example/sandtrail/archive), that each session is sealed
	// into (docs/archive.md) before it is pruned; a session that cannot
	// be sealed and stored is not pruned. Empty: no cold tier, and a
	// pruned session's events are gone from this host.
	Archive string `mapstructure:"archive"`
	// ArchivePlainHTTP lets Archive name a registry that is not on
	// loopback over plain http (its bundles then cross the network in
	// the clear).
	ArchivePlainHTTP bool `mapstructure:"archive_plain_http"`
}

// CheckpointConfig says how often the journal signs a checkpoint.
type CheckpointConfig struct {
	Every    int           `mapstructure:"every"`
	Interval time.Duration `mapstructure:"interval"`
}

// SessionsDir is where session directories live: <data_dir>/sessions.
func (c *Config) SessionsDir() string { return filepath.Join(c.DataDir, "sessions") }

// SocketDir is the directory of the daemon's sockets: the ingest socket's
// (/run/sandtrail by default). Every session sees it as the daemon's own.
func (c *Config) SocketDir() string { return filepath.Dir(c.Socket) }

// ControlSocket is the daemon's control socket: control.sock beside the
// ingest socket (/run/sandtrail/control.sock by default).
func (c *Config) ControlSocket() string {
	return filepath.Join(c.SocketDir(), "control.sock")
}

// JournalDir is where the journal lives: <data_dir>/journal.
func (c *Config) JournalDir() string { return filepath.Join(c.DataDir, "journal") }

// IndexPath is where the index lives: <data_dir>/index.db.
func (c *Config) IndexPath() string { return filepath.Join(c.DataDir, "index.db") }
