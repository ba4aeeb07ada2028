package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// command is one subcommand as its help shows it: how it is called, what
// it does, and the settings it reads (nil: every setting).
type command struct {
	name, use, summary, detail string
	settings                   []string
}

// storeSettings are what every command that opens the store reads.
var storeSettings = []string{"MONGODB_URI", "MSGAPI_DATABASE", "MSGAPI_DATA_DIR", "MSGAPI_EMBEDDED_ADDR",
	"MSGAPI_EMBEDDED_SOCKET", "MSGAPI_STORE_TIMEOUT", "MSGAPI_STORE_OP_TIMEOUT"}

var commands = []command{
	{name: "serve", use: "msgapi [serve] [flags]", summary: "run the HTTP server (the default command)",
		detail: "Serves the API on MSGAPI_ADDR; with no MONGODB_URI it starts the embedded engine in\n" +
			"MSGAPI_DATA_DIR. Ready when GET /readyz answers 200 (msgapi healthcheck)."},
	{name: "workspace", use: "msgapi workspace create NAME [flags]", summary: "create a workspace and print its API key",
		detail: "Prints the key once, as a line to paste into a shell:\n" +
			"  export KEY=mk_…\n" +
			"With the embedded engine a running server holds the data folder: stop it first, use the\n" +
			"admin API (POST /admin/workspaces), or point MONGODB_URI at the server's socket.",
		settings: storeSettings},
	{name: "secrets", use: "msgapi secrets rotate [flags]", summary: "re-encrypt every stored secret with MSGAPI_SECRET_KEY",
		detail:   "Re-encrypts workspace secrets stored in clear or under a key in MSGAPI_SECRET_KEY_PREVIOUS.",
		settings: append([]string{"MSGAPI_SECRET_KEY", "MSGAPI_SECRET_KEY_PREVIOUS"}, storeSettings...)},
	{name: "healthcheck", use: "msgapi healthcheck [flags]", summary: "exit 0 when the server on MSGAPI_ADDR is ready (GET /readyz)",
		detail:   "The image's HEALTHCHECK: exits 0 when GET /readyz answers 200, 1 otherwise.",
		settings: []string{"MSGAPI_ADDR"}},
	{name: "version", use: "msgapi version", summary: "print the module version, VCS revision and Go version",
		detail: "Also msgapi -version.", settings: []string{}},
}

func findCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// helpTopic is the command a -h belongs to: the first argument that names
// one (flags may stand anywhere, so the command need not come first).
func helpTopic(args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if _, ok := findCommand(a); ok {
			return a
		}
	}
	return ""
}

// overview is msgapi -h: the commands, one line each.
func overview(out io.Writer) {
	fmt.Fprintln(out, "usage: msgapi COMMAND [arguments] [flags]")
	fmt.Fprintln(out, "\ncommands:")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.use, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(out, "\nEvery setting is an environment variable and a flag; flags go before or after the arguments.")
	fmt.Fprintln(out, "msgapi COMMAND -h shows a command's settings; msgapi serve -h shows them all.")
}

// commandHelp is msgapi COMMAND -h: its usage, what it does and the
// settings it reads.
func commandHelp(out io.Writer, name string) {
	c, ok := findCommand(name)
	if !ok {
		overview(out)
		return
	}
	fmt.Fprintf(out, "usage: %s\n\n%s\n", c.use, c.detail)
	if c.settings != nil && len(c.settings) == 0 {
		return
	}
	fmt.Fprintln(out, "\nsettings (environment variable, flag, default):")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, s := range settings {
		if c.settings == nil || contains(c.settings, s.env) {
			fmt.Fprintf(tw, "  %s\t-%s\t%q\t%s\n", s.env, s.flag, s.def, s.help)
		}
	}
	tw.Flush()
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// unknownCommand is the error for a command msgapi does not have.
func unknownCommand(name string) error {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return fmt.Errorf("unknown command %q: the commands are %s (msgapi -h)", name, strings.Join(names, ", "))
}

// versionText is msgapi version: the module version, the VCS revision the
// binary was built from, and the Go that built it, from the build info.
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return fmt.Sprintf("msgapi: no build info\ngo %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		rev = "unknown (built without VCS information)"
	} else {
		if t := vcs["vcs.time"]; t != "" {
			rev += " (" + t + ")"
		}
		if vcs["vcs.modified"] == "true" {
			rev += " with uncommitted changes"
		}
	}
	goVersion := cmp.Or(bi.GoVersion, runtime.Version())
	return fmt.Sprintf("%s %s\nrevision %s\ngo %s %s/%s\n", cmp.Or(bi.Main.Path, "msgapi"), cmp.Or(bi.Main.Version, "(devel)"),
		rev, goVersion, runtime.GOOS, runtime.GOARCH)
}

func printVersion(out io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprint(out, versionText(bi, ok))
}
