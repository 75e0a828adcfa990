package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newSessionsCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "sessions", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("sessions: not built yet") }}
}
