package test

import (
	"errors"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// runBinary runs msgapi with args and env (on top of PATH and HOME) and
// returns its output and exit code.
func runBinary(t *testing.T, env map[string]string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("msgapi %s: %v", strings.Join(args, " "), err)
	return "", -1
}

// The process's exit codes: -h is 0 wherever it stands, a bad flag is 1.
func TestCLIExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "-h"}, 0, "usage: msgapi"},
		{[]string{"-h"}, 0, "usage: msgapi"},
		{[]string{"workspace", "create", "Acme", "-h"}, 0, "usage: msgapi"},
		{[]string{"serve", "-no-such-flag"}, 1, "-no-such-flag"},
		{[]string{"workspace", "create", "Acme", "-no-such-flag"}, 1, "-no-such-flag"},
	} {
		out, code := runBinary(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("msgapi %s: exit %d, want %d, with %q in:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
	}
}

// Flags after the workspace name are flags, not words of the name; the
// healthcheck subcommand follows the server's readiness.
func TestCLIFlagsAfterArgumentsAndHealthcheck(t *testing.T) {
	env := embeddedEnv(t, t.TempDir())
	out, code := runBinary(t, nil, "workspace", "create", "Acme", "Corp",
		"-data-dir", env["MSGAPI_DATA_DIR"], "-embedded-addr", env["MSGAPI_EMBEDDED_ADDR"])
	if code != 0 {
		t.Fatalf("workspace create: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "(Acme Corp) created") {
		t.Errorf("workspace create Acme Corp -data-dir … named the workspace otherwise:\n%s", out)
	}
	key := regexp.MustCompile(`mk_[A-Za-z0-9_-]{43}`).FindString(out)

	p := start(t, env) // the same data folder: the key works only if -data-dir was read
	if r := p.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100000","body":"hi"}`); r.status != http.StatusCreated {
		t.Fatalf("send with the CLI's key: %d %s", r.status, r.body)
	}
	addr := strings.TrimPrefix(p.url, "http://")
	if out, code := runBinary(t, map[string]string{"MSGAPI_ADDR": addr}, "healthcheck"); code != 0 {
		t.Errorf("healthcheck of a ready server: exit %d\n%s", code, out)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinary(t, map[string]string{"MSGAPI_ADDR": addr}, "healthcheck"); code != 1 {
		t.Errorf("healthcheck of a stopped server: exit %d, want 1\n%s", code, out)
	}
}
