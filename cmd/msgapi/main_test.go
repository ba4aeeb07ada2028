package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func noEnv(string) string { return "" }

// Flags work before, between and after the arguments; "--" ends them.
func TestLoadValuesFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantRest []string
		wantDB   string
	}{
		{[]string{"workspace", "create", "Acme", "-database", "other"}, []string{"workspace", "create", "Acme"}, "other"},
		{[]string{"-database", "other", "workspace", "create", "Acme"}, []string{"workspace", "create", "Acme"}, "other"},
		{[]string{"workspace", "-database=other", "create", "Acme", "Inc"}, []string{"workspace", "create", "Acme", "Inc"}, "other"},
		{[]string{"workspace", "create", "--", "-Acme"}, []string{"workspace", "create", "-Acme"}, "msgapi"},
		{[]string{"serve", "-addr", ":9"}, []string{"serve"}, "msgapi"},
		{nil, nil, "msgapi"},
	} {
		v, rest, err := loadValues("t", tc.args, noEnv, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.wantRest, rest); diff != "" {
			t.Errorf("%q: arguments (-want +got):\n%s", tc.args, diff)
		}
		if got := v["MSGAPI_DATABASE"]; got != tc.wantDB {
			t.Errorf("%q: database %q, want %q", tc.args, got, tc.wantDB)
		}
	}
}

// -h anywhere prints the usage and exits 0; a bad flag or argument exits 1
// with an error that names it, and never reaches the store.
func TestRunHelpAndBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantCode  int
		wantUsage bool
		wantErr   string
	}{
		{[]string{"-h"}, 0, true, ""},
		{[]string{"serve", "-h"}, 0, true, ""},
		{[]string{"workspace", "create", "Acme", "-h"}, 0, true, ""},
		{[]string{"healthcheck", "--help"}, 0, true, ""},
		{[]string{"help"}, 0, true, ""},
		{[]string{"serve", "-nope"}, 1, false, "-nope"},
		{[]string{"workspace", "create", "Acme", "-bogus"}, 1, false, "-bogus"},
		{[]string{"workspace", "create", "Acme", "-dedup-wait", "soon"}, 1, false, "MSGAPI_DEDUP_WAIT"},
		{[]string{"workspace", "create"}, 1, false, "usage"},
		{[]string{"serve", "extra"}, 1, false, `"extra"`},
		{[]string{"sevre"}, 1, false, `unknown command "sevre": the commands are serve, workspace, secrets, healthcheck, version`},
		{[]string{"help", "sevre"}, 1, false, `unknown command "sevre"`},
		{[]string{"version", "extra"}, 1, false, `"extra"`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &out)
		if got := exitCode(err); got != tc.wantCode {
			t.Errorf("%q: exit code %d (%v), want %d", tc.args, got, err, tc.wantCode)
		}
		if got := strings.Contains(out.String(), "usage: msgapi"); got != tc.wantUsage {
			t.Errorf("%q: usage printed %v, want %v:\n%s", tc.args, got, tc.wantUsage, out.String())
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: error %v, want it to name %s", tc.args, err, tc.wantErr)
		}
		if tc.wantCode == 0 && tc.args[0] != "help" && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: error %v, want flag.ErrHelp", tc.args, err)
		}
	}
}

func TestReadyzURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/readyz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/readyz",
		"[::]:8080":      "http://127.0.0.1:8080/readyz",
		"127.0.0.1:9000": "http://127.0.0.1:9000/readyz",
		"[::1]:9000":     "http://[::1]:9000/readyz",
		"api.local:80":   "http://api.local:80/readyz",
	} {
		if got, err := readyzURL(addr); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := readyzURL("8080"); err == nil {
		t.Error("readyzURL accepted an address without a port")
	}
}

// msgapi healthcheck asks /readyz on MSGAPI_ADDR (or -addr) and succeeds
// only on 200.
func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	closed := func() string { l, _ := net.Listen("tcp", "127.0.0.1:0"); a := l.Addr().String(); l.Close(); return a }()

	for _, tc := range []struct {
		name   string
		status int
		args   []string
		env    map[string]string
		ok     bool
	}{
		{"ready, MSGAPI_ADDR", 200, []string{"healthcheck"}, map[string]string{"MSGAPI_ADDR": addr}, true},
		{"ready, every interface", 200, []string{"healthcheck"}, map[string]string{"MSGAPI_ADDR": ":" + port}, true},
		{"ready, flag", 200, []string{"healthcheck", "-addr", addr}, nil, true},
		{"not ready", 503, []string{"healthcheck"}, map[string]string{"MSGAPI_ADDR": addr}, false},
		{"nothing listening", 200, []string{"healthcheck"}, map[string]string{"MSGAPI_ADDR": closed}, false},
	} {
		status, paths = tc.status, nil
		var out bytes.Buffer
		err := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out)
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok=%v", tc.name, err, tc.ok)
		}
		if tc.name != "nothing listening" && (len(paths) != 1 || paths[0] != "/readyz") {
			t.Errorf("%s: the server saw %v, want one GET /readyz", tc.name, paths)
		}
	}
}

// Each command's -h shows that command: its usage line and the settings it
// reads, not the whole program's; -h finds the command wherever it stands.
func TestCommandHelp(t *testing.T) {
	known := map[string]bool{}
	for _, s := range settings {
		known[s.env] = true
	}
	for _, c := range commands {
		for _, env := range c.settings {
			if !known[env] {
				t.Errorf("%s: names %s, which is not a setting", c.name, env)
			}
		}
	}
	for _, tc := range []struct {
		args        []string
		wantUse     string
		want, avoid []string
	}{
		{[]string{"-h"}, "usage: msgapi COMMAND", []string{"workspace create NAME", "healthcheck", "version"}, []string{"MSGAPI_DEDUP_WINDOW"}},
		{[]string{"help"}, "usage: msgapi COMMAND", []string{"msgapi COMMAND -h"}, []string{"-addr"}},
		{[]string{"serve", "-h"}, "usage: msgapi [serve]", []string{"MSGAPI_DEDUP_WINDOW", "MSGAPI_EVENTS_ALLOW_HTTP", "MONGODB_URI"}, nil},
		{[]string{"-addr", ":9", "serve", "--help"}, "usage: msgapi [serve]", []string{"MSGAPI_ADDR"}, nil},
		{[]string{"workspace", "create", "Acme", "-h"}, "usage: msgapi workspace create NAME", []string{"export KEY=", "MONGODB_URI", "MSGAPI_DATA_DIR"}, []string{"MSGAPI_DEDUP_WINDOW", "MSGAPI_ADDR"}},
		{[]string{"-h", "workspace"}, "usage: msgapi workspace create NAME", []string{"MSGAPI_DATABASE"}, []string{"MSGAPI_SENDER_SMS"}},
		{[]string{"help", "workspace"}, "usage: msgapi workspace create NAME", []string{"MSGAPI_DATABASE"}, []string{"MSGAPI_SENDER_SMS"}},
		{[]string{"secrets", "rotate", "-h"}, "usage: msgapi secrets rotate", []string{"MSGAPI_SECRET_KEY_PREVIOUS", "MONGODB_URI"}, []string{"MSGAPI_ADDR"}},
		{[]string{"healthcheck", "-h"}, "usage: msgapi healthcheck", []string{"MSGAPI_ADDR"}, []string{"MONGODB_URI"}},
		{[]string{"version", "-h"}, "usage: msgapi version", nil, []string{"settings"}},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &out)
		if exitCode(err) != 0 {
			t.Errorf("%q: %v", tc.args, err)
		}
		got := out.String()
		if !strings.HasPrefix(got, tc.wantUse) {
			t.Errorf("%q: help starts %q, want %q", tc.args, strings.SplitN(got, "\n", 2)[0], tc.wantUse)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: help lacks %q:\n%s", tc.args, w, got)
			}
		}
		for _, a := range tc.avoid {
			if strings.Contains(got, a) {
				t.Errorf("%q: help shows %q, another command's:\n%s", tc.args, a, got)
			}
		}
	}
}

// msgapi version and -version print the module, the VCS revision and the
// Go version from the build info.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/msgapi/msgapi", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-03T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	want := "github.com/msgapi/msgapi v1.2.3\nrevision 0123456789abcdef (2026-12-03T18:00:00Z) with uncommitted changes\ngo go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if got := versionText(bi, true); got != want {
		t.Errorf("versionText = %q, want %q", got, want)
	}
	bi.Settings = nil
	if got := versionText(bi, true); !strings.Contains(got, "revision unknown") {
		t.Errorf("without VCS settings: %q, want the revision unknown", got)
	}
	for _, args := range [][]string{{"version"}, {"-version"}, {"serve", "--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, noEnv, &out); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !strings.Contains(out.String(), "\ngo "+runtime.Version()+" ") {
			t.Errorf("%q: %q does not name %s", args, out.String(), runtime.Version())
		}
	}
}
