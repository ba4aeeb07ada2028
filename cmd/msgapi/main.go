// Command msgapi runs the message-send API, or administers it.
//
//	msgapi [serve] [flags]          run the HTTP server (the default)
//	msgapi workspace create NAME    create a workspace, print its API key
//	msgapi secrets rotate           re-encrypt stored secrets with the current key
//	msgapi healthcheck              exit 0 when the server is ready
//	msgapi version                  module version, VCS revision, Go version
//
// msgapi -h lists the commands; msgapi COMMAND -h shows one command and
// the settings it reads.
//
// Every setting is an environment variable and a flag (config.go); flags
// go before or after the arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "msgapi:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is 0 for success and for -h (the usage was asked for and
// printed), 1 for every error.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

// run is the whole program; main only supplies the process's context,
// arguments, environment and stdout, so tests can call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if versionFlag(args) {
		printVersion(stdout)
		return nil
	}
	v, rest, err := loadValues("msgapi", args, getenv, stdout)
	if err != nil {
		return err
	}
	cmd := "serve"
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	switch cmd {
	case "serve", "healthcheck":
		if len(rest) > 0 {
			return fmt.Errorf("msgapi %s takes no arguments, got %q", cmd, strings.Join(rest, " "))
		}
		if cmd == "healthcheck" {
			return healthcheck(ctx, v, stdout)
		}
		return serve(ctx, v, stdout)
	case "workspace":
		return workspaceCmd(ctx, v, rest, stdout)
	case "secrets":
		return secretsCmd(ctx, v, rest, stdout)
	case "version":
		if len(rest) > 0 {
			return fmt.Errorf("msgapi version takes no arguments, got %q", strings.Join(rest, " "))
		}
		printVersion(stdout)
		return nil
	case "help":
		if len(rest) > 0 {
			if _, ok := findCommand(rest[0]); !ok {
				return unknownCommand(rest[0])
			}
			commandHelp(stdout, rest[0])
			return nil
		}
		overview(stdout)
		return nil
	default:
		return unknownCommand(cmd)
	}
}

// versionFlag reports whether -version (or --version) is among the flags.
func versionFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-version" || a == "--version" {
			return true
		}
	}
	return false
}
