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

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/dnsproxy"
)

// Config is the typed configuration (package host holds its types).
type Config = daemon.Config

// DefaultDataDir is where sandtrail keeps its state.
const DefaultDataDir = "/var/lib/sandtrail"

func defaults(v *viper.Viper) {
	v.SetDefault("data_dir", DefaultDataDir)
	v.SetDefault("socket", "/run/sandtrail/ingest.sock")
	v.SetDefault("key_file", "")
	v.SetDefault("log_level", "info")
	v.SetDefault("host", "")
	v.SetDefault("origin", "")
	v.SetDefault("store", "")
	v.SetDefault("policy", "")
	v.SetDefault("shim_dir", launch.ShimDir)
	v.SetDefault("checkpoint.every", 4096)
	v.SetDefault("checkpoint.interval", time.Second)
	v.SetDefault("ingest.socket_mode", "0666")
	v.SetDefault("ingest.max_conns", 256)
	v.SetDefault("ingest.max_conns_per_peer", 32)
	v.SetDefault("ingest.dedup_size", 1<<18)
	v.SetDefault("ingest.idle_timeout", 2*time.Minute)
	v.SetDefault("ingest.drain_timeout", 30*time.Second)
	v.SetDefault("ingest.stats_interval", 5*time.Minute)
	v.SetDefault("ingest.spool_dir", "")
	v.SetDefault("dns.enabled", true)
	v.SetDefault("dns.upstream", []string{})
	v.SetDefault("dns.timeout", dnsproxy.DefaultTimeout)
	v.SetDefault("dns.max_sessions", dnsproxy.DefaultMaxSessions)
	v.SetDefault("mirror.enabled", false)
	v.SetDefault("mirror.listen", "127.0.0.1:8484")
	v.SetDefault("mirror.upstreams", map[string]string{})
	v.SetDefault("mirror.cache_dir", "")
	v.SetDefault("mirror.cache_max", "")
	v.SetDefault("mirror.meta_ttl", 5*time.Minute)
	v.SetDefault("retention.hot_days", 90)
	v.SetDefault("retention.interval", 24*time.Hour)
	v.SetDefault("retention.archive", "")
	v.SetDefault("retention.archive_plain_http", false)
	v.SetDefault("api.listen", "")
	v.SetDefault("api.tls_cert", "")
	v.SetDefault("api.tls_key", "")
	v.SetDefault("api.tokens_file", "")
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
	f.StringVar(&g.configFile, "config", "", "config file (env SANDTRAIL_CONFIG; default /etc/sandtrail/config.yaml when it exists)")
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
		file = os.Getenv("SANDTRAIL_CONFIG")
	}
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
	if err := cfg.DNS.Check(); err != nil {
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

// newLogger builds the root logger at the configured level, on stderr.
func newLogger(c *Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "sandtrail",
		Level:  hclog.LevelFromString(c.LogLevel),
		Output: os.Stderr,
	})
}
