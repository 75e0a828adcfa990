package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/index"
)

// This file holds what the commands' output and preambles share: the
// --format check, JSON output, the data directory's paths, and loading the
// config with the index or with the verifier keys.

// checkFormat checks --format against the formats a command offers, and
// returns a usage error that names them.
func checkFormat(format string, offered ...string) error {
	if slices.Contains(offered, format) {
		return nil
	}
	list := strings.Join(offered[:len(offered)-1], ", ") + " or " + offered[len(offered)-1]
	return usageErr(fmt.Errorf("--format %q: want %s", format, list))
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// loadIndex loads g's config and opens its index, caught up with the
// journal. The caller closes the index.
func (g *globals) loadIndex(ctx context.Context) (*Config, *index.Index, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	ix, err := openIndex(ctx, cfg, newLogger(cfg))
	if err != nil {
		return nil, nil, err
	}
	return cfg, ix, nil
}

// loadVerifiers loads g's config and the verifier keys in files, or the one
// beside the signing key when there are none; its errors are usage errors
// that name the command.
func (g *globals) loadVerifiers(command string, files []string) (*Config, note.Verifiers, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, usageErr(err)
	}
	vs, err := loadVerifiers(cfg, files)
	if err != nil {
		return nil, nil, usageErr(fmt.Errorf("%s: %w", command, err))
	}
	return cfg, vs, nil
}
