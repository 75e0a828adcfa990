package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newDaemonCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "daemon", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("daemon: not built yet") }}
}
