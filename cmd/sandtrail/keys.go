package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newKeysCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "keys", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("keys: not built yet") }}
}
