package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/intel"
	"github.com/sandtrail/sandtrail/record/event"
)

// IntelPath is the store of known-malicious package records that `sandtrail
// intel import` writes and the mirror reads: <data_dir>/intel.db, root's,
// 0600, beside the index.
func (c *Config) IntelPath() string { return filepath.Join(c.DataDir, "intel.db") }

// OpenIntel opens the intel store of cfg, creating the file (not the data
// directory, which install.sh makes).
func OpenIntel(cfg *Config) (*intel.Store, error) { return intel.Open(cfg.IntelPath()) }

// mirrorPolicy is the mirror's policy: pol behind the known_malicious
// check of the intel store (intel.Guard), which the mirror reads as imports
// change it. Without a data directory there is no store, and pol is the
// policy; a store that cannot be opened fails the mirror (closed). close
// closes the store.
func mirrorPolicy(cfg *Config, pol *policies.Engine) (p intel.PackagePolicy, close func() error, err error) {
	none := func() error { return nil }
	if fi, err := os.Stat(cfg.DataDir); cfg.DataDir == "" || err != nil || !fi.IsDir() {
		return pol, none, nil
	}
	s, err := OpenIntel(cfg)
	if err != nil {
		return nil, none, err
	}
	return intel.Guard(pol, s), s.Close, nil
}

// The daemon journals the alerts root raises outside it (control.OpAlerts).
var _ control.Raiser = (*Daemon)(nil)

// Raise journals alerts, durably, with the package view's rules watching.
func (d *Daemon) Raise(ctx context.Context, alerts []*event.Event) error {
	if err := d.app.Append(ctx, alerts...); err != nil {
		return fmt.Errorf("journaling alerts: %w", err)
	}
	return nil
}

// Where RaiseAlerts journaled.
const (
	RaisedByDaemon = "daemon"  // through the running daemon's control socket
	RaisedDirectly = "journal" // into the journal, which no daemon holds
)

// alertsPerCall bounds the alerts of one control request, well inside its
// size limit.
const alertsPerCall = 1000

// RaiseAlerts journals alerts raised outside the daemon (the re-hunt of
// `sandtrail intel import`): through the running daemon's control socket,
// the journal's one writer, or, when no daemon runs, into the journal
// directly. It says which. A daemon takes at most alertsPerCall alerts a
// request; one that stops half-way leaves the rest to the journal.
func RaiseAlerts(ctx context.Context, cfg *Config, alerts []*event.Event, log hclog.Logger) (string, error) {
	if len(alerts) == 0 {
		return "", nil
	}
	sent, err := raiseThroughDaemon(cfg, alerts)
	if !errors.Is(err, control.ErrNoDaemon) {
		return RaisedByDaemon, err
	}
	alerts = alerts[sent:] // those a daemon that stopped half-way journaled are not written again
	j, err := OpenJournal(cfg, log)
	if err != nil {
		return RaisedDirectly, err
	}
	err = j.Append(ctx, alerts...)
	return RaisedDirectly, errors.Join(err, j.Close())
}

// raiseThroughDaemon sends alerts to the running daemon, alertsPerCall at
// a time; sent counts those it journaled.
func raiseThroughDaemon(cfg *Config, alerts []*event.Event) (sent int, err error) {
	for sent < len(alerts) {
		n := min(len(alerts)-sent, alertsPerCall)
		if _, err := control.Call(cfg.ControlSocket(), &control.Request{Op: control.OpAlerts, Events: alerts[sent : sent+n]}); err != nil {
			return sent, err
		}
		sent += n
	}
	return sent, nil
}
