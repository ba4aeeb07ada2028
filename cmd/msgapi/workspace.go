package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/msgapi/msgapi/workspace"
)

// workspaceCmd: msgapi workspace create NAME. For when no server runs (with
// the embedded engine, a running server holds its data folder; use the
// admin API then, or point MONGODB_URI at the running engine).
func workspaceCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) < 1 || args[0] != "create" {
		return fmt.Errorf("usage: msgapi workspace create NAME [flags]")
	}
	v, rest, err := loadValues("msgapi workspace create", args[1:], getenv, stdout)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(strings.Join(rest, " "))
	if name == "" {
		return fmt.Errorf("usage: msgapi workspace create NAME [flags]")
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
	fmt.Fprintf(stdout, "workspace %s (%s) created.\nAPI key (shown once, store it now):\n%s\n", ws.ID, ws.Name, key)
	return nil
}
