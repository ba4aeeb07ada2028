package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/msgapi/msgapi/workspace"
)

// workspaceCmd: msgapi workspace create NAME. For when no server runs (with
// the embedded engine, a running server holds its data folder; use the
// admin API then, or point MONGODB_URI at the running engine). args are
// the arguments after "workspace", flags already parsed out of them; the
// words of an unquoted name are joined with spaces.
func workspaceCmd(ctx context.Context, v values, args []string, stdout io.Writer) error {
	const use = "usage: msgapi workspace create NAME [flags]"
	if len(args) < 1 || args[0] != "create" {
		return errors.New(use)
	}
	name := strings.TrimSpace(strings.Join(args[1:], " "))
	if name == "" {
		return errors.New(use)
	}
	cfg, err := parseConfig(v)
	if err != nil {
		return err
	}
	log := newLogger(io.Discard, "error")
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close(context.WithoutCancel(ctx))
	ws, key, err := workspace.NewStore(st, 0).Create(ctx, name)
	if err != nil {
		return err
	}
	// A shell comment, then an export line: the output can be pasted into a
	// shell, or run as eval "$(msgapi workspace create Acme)".
	fmt.Fprintf(stdout, "# workspace %s (%s) created; its API key is shown once (only its hash is stored):\nexport KEY=%s\n",
		ws.ID, strings.ReplaceAll(ws.Name, "\n", " "), key)
	return nil
}
