package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// logLine writes one event through logOutput(w, format) as serve does.
func logLine(t *testing.T, w io.Writer, format string) {
	t.Helper()
	out, err := logOutput(w, format)
	if err != nil {
		t.Fatal(err)
	}
	log := newLogger(out, "info")
	log.Info().Str("event", "message.api.sent").Str("messageId", "msg_1").Msg("message sent")
}

// At a real terminal (a pseudo-terminal), auto renders readable lines;
// json keeps JSON there too.
func TestLogFormatAtATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	lines := bufio.NewReader(ptmx)
	read := func() string {
		t.Helper()
		_ = ptmx.SetReadDeadline(time.Now().Add(5 * time.Second))
		s, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read the terminal: %v", err)
		}
		return strings.TrimSpace(s)
	}

	logLine(t, tty, "auto")
	got := read()
	if strings.HasPrefix(got, "{") || !strings.Contains(got, "INF") || !strings.Contains(got, "message sent") ||
		!strings.Contains(got, "event=") || !strings.Contains(got, "msg_1") {
		t.Errorf("auto at a terminal: %q, want a console line (level INF, message, event=…)", got)
	}
	if !strings.Contains(got, "\x1b[") {
		t.Errorf("auto at a terminal: %q has no colour", got)
	}

	logLine(t, tty, "json")
	if got := read(); !json.Valid([]byte(got)) {
		t.Errorf("json at a terminal: %q is not a JSON line", got)
	}
}

// Not a terminal (a pipe, a file, a container's stdout): auto is JSON;
// console is forced readable, without colour codes.
func TestLogFormatNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logLine(t, w, "auto")
	w.Close()
	b, _ := io.ReadAll(r)
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil || m["event"] != "message.api.sent" {
		t.Errorf("auto into a pipe: %q, want a JSON line (%v)", b, err)
	}

	var buf bytes.Buffer
	logLine(t, &buf, "console")
	if got := buf.String(); strings.HasPrefix(got, "{") || !strings.Contains(got, "INF") || strings.Contains(got, "\x1b[") {
		t.Errorf("console into a buffer: %q, want a plain readable line", got)
	}

	if _, err := logOutput(&buf, "pretty"); err == nil {
		t.Error("logOutput accepted MSGAPI_LOG_FORMAT=pretty")
	}
	v, _, _ := loadValues("t", []string{"-log-format", "pretty"}, noEnv, &buf)
	if _, err := parseConfig(v); err == nil || !strings.Contains(err.Error(), "MSGAPI_LOG_FORMAT") {
		t.Errorf("parseConfig: %v, want MSGAPI_LOG_FORMAT named", err)
	}
}
