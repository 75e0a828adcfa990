package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/sandtrail/sandtrail/collector/dns"
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
	// Policy is the policy file the host enforces and records with (egress,
	// sensitive files, blocked domains, default limits); empty means the
	// embedded default policy.
	Policy     string           `mapstructure:"policy"`
	Checkpoint CheckpointConfig `mapstructure:"checkpoint"`
	Ingest     IngestConfig     `mapstructure:"ingest"`
	DNS        DNSConfig        `mapstructure:"dns"`
	Mirror     MirrorConfig     `mapstructure:"mirror"`
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
	// registries by default.
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
	// MaxConns caps concurrent connections.
	MaxConns int `mapstructure:"max_conns"`
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

// CheckpointConfig says how often the journal signs a checkpoint.
type CheckpointConfig struct {
	Every    int           `mapstructure:"every"`
	Interval time.Duration `mapstructure:"interval"`
}

// DefaultDataDir is where sandtrail keeps its state.
const DefaultDataDir = "/var/lib/sandtrail"

func defaults(v *viper.Viper) {
	v.SetDefault("data_dir", DefaultDataDir)
	v.SetDefault("socket", "/run/sandtrail/ingest.sock")
	v.SetDefault("key_file", "")
	v.SetDefault("log_level", "info")
	v.SetDefault("host", "")
	v.SetDefault("origin", "")
	v.SetDefault("policy", "")
	v.SetDefault("checkpoint.every", 4096)
	v.SetDefault("checkpoint.interval", time.Second)
	v.SetDefault("ingest.socket_mode", "0666")
	v.SetDefault("ingest.max_conns", 256)
	v.SetDefault("ingest.dedup_size", 1<<18)
	v.SetDefault("ingest.idle_timeout", 2*time.Minute)
	v.SetDefault("ingest.drain_timeout", 30*time.Second)
	v.SetDefault("ingest.stats_interval", 5*time.Minute)
	v.SetDefault("ingest.spool_dir", "")
	v.SetDefault("dns.enabled", true)
	v.SetDefault("dns.upstream", []string{})
	v.SetDefault("dns.timeout", dns.DefaultTimeout)
	v.SetDefault("dns.max_sessions", dns.DefaultMaxSessions)
	v.SetDefault("mirror.enabled", false)
	v.SetDefault("mirror.listen", "127.0.0.1:8484")
	v.SetDefault("mirror.upstreams", map[string]string{})
	v.SetDefault("mirror.cache_dir", "")
	v.SetDefault("mirror.cache_max", "")
	v.SetDefault("mirror.meta_ttl", 5*time.Minute)
}

// globals holds the persistent flags and builds the Config on demand.
type globals struct {
	configFile string
	v          *viper.Viper
}

func (g *globals) bind(root *cobra.Command) {
	g.v = viper.New()
	defaults(g.v)
	f := root.PersistentFlags()
	f.StringVar(&g.configFile, "config", "", "config file (default /etc/sandtrail/config.yaml when it exists)")
	f.String("data", DefaultDataDir, "data directory: journal, index, keys (env SANDTRAIL_DATA_DIR)")
	f.String("log-level", "info", "log level: trace, debug, info, warn, error")
	_ = g.v.BindPFlag("data_dir", f.Lookup("data"))
	_ = g.v.BindPFlag("log_level", f.Lookup("log-level"))
}

// bindFlag binds a command's own flag to a config key.
func (g *globals) bindFlag(key string, fl *pflag.Flag) {
	_ = g.v.BindPFlag(key, fl)
}

// load reads the config file and environment into a Config. Unknown keys in
// the file are an error.
func (g *globals) load() (*Config, error) {
	v := g.v
	v.SetEnvPrefix("SANDTRAIL")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	file := g.configFile
	if file == "" {
		if _, err := os.Stat("/etc/sandtrail/config.yaml"); err == nil {
			file = "/etc/sandtrail/config.yaml"
		}
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("reading config %s: %w", file, err)
		}
	}
	var cfg Config
	if err := v.UnmarshalExact(&cfg); err != nil {
		return nil, fmt.Errorf("decoding config %s: %w", file, err)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("config: data_dir must not be empty")
	}
	if cfg.KeyFile == "" {
		cfg.KeyFile = filepath.Join(cfg.DataDir, "keys", "checkpoint.key")
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if err := checkDNSConfig(&cfg.DNS); err != nil {
		return nil, err
	}
	if v.InConfig("mirror") && !v.InConfig("mirror.enabled") {
		cfg.Mirror.Enabled = true
	}
	if cfg.Mirror.CacheDir == "" {
		cfg.Mirror.CacheDir = filepath.Join(cfg.DataDir, "mirror")
	}
	if cfg.Origin == "" {
		cfg.Origin = "sandtrail/" + cfg.Host
	}
	return &cfg, nil
}

// ControlSocket is the daemon's control socket: control.sock beside the
// ingest socket (/run/sandtrail/control.sock by default).
func (c *Config) ControlSocket() string {
	return filepath.Join(filepath.Dir(c.Socket), "control.sock")
}

// logger builds the root logger at the configured level, on stderr.
func (c *Config) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "sandtrail",
		Level:  hclog.LevelFromString(c.LogLevel),
		Output: os.Stderr,
	})
}
