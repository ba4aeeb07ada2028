package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestLogSend(t *testing.T) {
	var buf bytes.Buffer
	const delay = 50 * time.Millisecond
	l := NewLog(zerolog.New(&buf), delay)
	m := testMessage()

	start := time.Now()
	got := l.Send(context.Background(), m)
	elapsed := time.Since(start)

	want := Result{Status: Sent, ProviderMessageID: "log-msg-1"}
	if got != want {
		t.Errorf("Send = %+v, want %+v", got, want)
	}
	if elapsed < delay {
		t.Errorf("Send returned after %s, want at least the %s delay", elapsed, delay)
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d log lines, want 1: %s", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"level": "info", "event": EventLogDelivered, "messageId": "msg-1", "channel": "sms"} {
		if line[k] != v {
			t.Errorf("log %s = %v, want %q", k, line[k], v)
		}
	}
	for _, secret := range []string{m.Body, m.RecipientPhone, m.RecipientEmail} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("info log contains %q: %s", secret, buf.String())
		}
	}
}

func TestLogSendCancelled(t *testing.T) {
	var buf bytes.Buffer
	l := NewLog(zerolog.New(&buf), 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()

	start := time.Now()
	got := l.Send(ctx, testMessage())
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Send took %s after its context ended, want it to return at once", elapsed)
	}
	if got.Status != Failed || got.Error == "" {
		t.Errorf("Send = %+v, want Failed with an error", got)
	}
	if buf.Len() != 0 {
		t.Errorf("a cancelled send logged a delivery: %s", buf.String())
	}
}
