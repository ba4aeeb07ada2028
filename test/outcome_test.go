package test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
)

// Nothing stuck, nothing lost on the way down: the real binary, killed or
// stopped during a provider call.

const slowText = `{"channel":"sms","recipientPhone":"+15550100000","body":"Your order has shipped"}`

// slowEnv is an embedded-store process whose provider (the log sender)
// takes delay, with short send timeout, margin and sweep interval.
func slowEnv(t *testing.T, dir string, delay time.Duration) map[string]string {
	env := embeddedEnv(t, dir)
	for k, v := range map[string]string{
		"MSGAPI_LOG_SENDER_DELAY": delay.String(),
		"MSGAPI_SEND_TIMEOUT":     "2s",
		"MSGAPI_OUTCOME_MARGIN":   "1s",
		"MSGAPI_SWEEP_INTERVAL":   "300ms",
		"MSGAPI_LOG_LEVEL":        "info",
	} {
		env[k] = v
	}
	return env
}

// inProviderCall waits until p's process has written the message of its
// request in flight (status sending: it is with its provider), reading the
// process's embedded store as a second client would, and returns its id.
func inProviderCall(t *testing.T, env map[string]string) (messageID string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{URI: engineURI(env), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var m struct {
			ID     string `bson:"_id"`
			Status string `bson:"status"`
		}
		err := st.Collection("messages").FindOne(ctx, bson.D{{Key: "direction", Value: "outbound"}}).Decode(&m)
		if err == nil {
			if m.Status != "sending" {
				t.Fatalf("message %s already %s before the test could stop its process", m.ID, m.Status)
			}
			return m.ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the message was not written within 20s")
	return ""
}

// postAsync sends body in the background, without failing the test when the
// process dies under it.
func postAsync(p *proc, key, body string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/api/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- reply{}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ch <- reply{res.StatusCode, res.Header, b}
	}()
	return ch
}

// kill -9 during a provider call, then a restart: the message does not stay
// "sending"; the sweeper makes it unknown within send timeout + margin + a
// sweep, and a retry of the same text gets it as a duplicate, not a send.
func TestKilledDuringProviderCallBecomesUnknown(t *testing.T) {
	dir := t.TempDir()
	env := slowEnv(t, dir, time.Minute)
	p := start(t, env)
	_, key := p.createWorkspace(admin)
	postAsync(p, key, slowText)
	id := inProviderCall(t, env)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.done <- <-p.done // (put back for the cleanup's stop)

	env["MSGAPI_LOG_SENDER_DELAY"] = "0s"
	killedAt := time.Now()
	p2 := start(t, env)
	var status, errText any
	for time.Since(killedAt) < 15*time.Second {
		m := p2.do(http.MethodGet, "/api/messages/"+id, key, "").json(t)["message"].(map[string]any)
		status, errText = m["status"], m["error"]
		if status != "sending" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != "unknown" || errText != "outcome lost: the process ended during the provider call" {
		t.Fatalf("message %s after a kill -9 and a restart: status %v, error %v; want unknown with the lost-outcome error", id, status, errText)
	}
	t.Logf("unknown %s after the kill", time.Since(killedAt).Round(10*time.Millisecond))
	retry := p2.do(http.MethodPost, "/api/messages", key, slowText).json(t)
	m, _ := retry["message"].(map[string]any)
	if retry["duplicateOnly"] != true || m == nil || m["id"] != id || m["status"] != "unknown" {
		t.Fatalf("retry of the same text: %v, want the duplicate answer with %s (unknown)", retry, id)
	}
	if got := countLines(p2.Logs(), `"event":"message.api.outcome_lost"`); got != 1 {
		t.Errorf("%d outcome_lost events, want 1:\n%s", got, p2.Logs())
	}
	if got := countLines(p2.Logs(), `"event":"sender.log_delivered"`) + countLines(p.Logs(), `"event":"sender.log_delivered"`); got != 0 {
		t.Errorf("%d log deliveries, want 0 (the one provider call was killed)", got)
	}
}

// SIGTERM during a slow provider call: the call finishes, its outcome is
// recorded as sent, the caller gets its answer, then the process exits.
func TestSIGTERMDuringSlowProviderCallFinishes(t *testing.T) {
	dir := t.TempDir()
	env := slowEnv(t, dir, 1500*time.Millisecond)
	p := start(t, env)
	_, key := p.createWorkspace(admin)
	done := postAsync(p, key, slowText)
	id := inProviderCall(t, env)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var r reply
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the caller got no answer within 20s of SIGTERM")
	}
	if r.status != http.StatusCreated || r.json(t)["status"] != "sent" {
		t.Fatalf("answer after SIGTERM: %d %s, want 201 sent", r.status, r.body)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Logs())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	p2 := start(t, env)
	if m := p2.do(http.MethodGet, "/api/messages/"+id, key, "").json(t)["message"].(map[string]any); m["status"] != "sent" {
		t.Fatalf("after the restart the message is %v, want sent", m["status"])
	}
}

func countLines(logs, substr string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
