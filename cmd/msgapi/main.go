// Command msgapi runs the message-send API, or administers it.
//
//	msgapi [serve] [flags]          run the HTTP server (the default)
//	msgapi workspace create NAME    create a workspace, print its API key
//	msgapi secrets rotate           re-encrypt stored secrets with the current key
//
// Every setting is an environment variable and a flag (config.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts a graceful shutdown; a second one, with
		// the default handling restored, ends the process at once.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "msgapi:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program; main only supplies the process's context,
// arguments, environment and stdout, so tests can call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout)
	case "workspace":
		return workspaceCmd(ctx, args, getenv, stdout)
	case "secrets":
		return secretsCmd(ctx, args, getenv, stdout)
	case "help":
		usage(stdout)
		return nil
	default:
		usage(stdout)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
