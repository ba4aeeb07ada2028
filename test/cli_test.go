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
		{[]string{"workspace", "create", "Acme", "-h"}, 0, "usage: msgapi workspace create NAME"},
		{[]string{"healthcheck", "-h"}, 0, "usage: msgapi healthcheck"},
		{[]string{"version"}, 0, "\nrevision "},
		{[]string{"-version"}, 0, "\nrevision "},
		{[]string{"sevre"}, 1, `msgapi: unknown command "sevre"`},
	} {
		out, code := runBinary(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("msgapi %s: exit %d, want %d, with %q in:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
		if tc.code != 0 && !strings.HasPrefix(out, "msgapi: ") {
			t.Errorf("msgapi %s: the error is not the first thing printed:\n%s", strings.Join(tc.args, " "), out)
		}
	}
}

// msgapi version names the revision the binary was built from, as the Go
// toolchain recorded it (go version -m), and the Go that built it.
func TestCLIVersion(t *testing.T) {
	out, code := runBinary(t, nil, "version")
	if code != 0 {
		t.Fatalf("msgapi version: exit %d\n%s", code, out)
	}
	info, err := exec.Command("go", "version", "-m", binary(t)).Output()
	if err != nil {
		t.Fatal(err)
	}
	field := func(key string) string {
		m := regexp.MustCompile(`(?m)^\s+(?:build|mod)\s+` + regexp.QuoteMeta(key) + `[=\s](\S*)`).FindSubmatch(info)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	goVersion := regexp.MustCompile(`^\S+: (go\S+)`).FindSubmatch(info)
	if goVersion == nil || !strings.Contains(out, "\ngo "+string(goVersion[1])+" ") {
		t.Errorf("msgapi version does not name the Go that built it (%s):\n%s", goVersion, out)
	}
	if !strings.HasPrefix(out, "github.com/msgapi/msgapi "+field("github.com/msgapi/msgapi")) {
		t.Errorf("msgapi version does not start with the module and its version:\n%s\n%s", out, info)
	}
	if rev := field("vcs.revision"); rev != "" {
		if !strings.Contains(out, "\nrevision "+rev) {
			t.Errorf("built from %s, msgapi version says:\n%s", rev, out)
		}
	} else if !strings.Contains(out, "\nrevision unknown") {
		t.Errorf("built without VCS information, msgapi version says:\n%s", out)
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
	// The output pasted into a shell (or eval'd) exports the key as KEY.
	sh := exec.Command("sh", "-c", `eval "$(cat)"; printf %s "$KEY"`)
	sh.Stdin = strings.NewReader(out)
	if got, err := sh.Output(); err != nil || key == "" || string(got) != key {
		t.Errorf("eval of workspace create's output: KEY=%q (%v), want %q:\n%s", got, err, key, out)
	}

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
