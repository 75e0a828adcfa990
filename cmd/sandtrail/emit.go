package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newEmitCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "emit", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("emit: not built yet") }}
}
