package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newReindexCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "reindex", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("reindex: not built yet") }}
}
