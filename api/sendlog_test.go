package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/sender"
)

// A provider's error names the recipient (Twilio quotes the number, go-mail
// the address). The send_failed log line carries it scrubbed; the
// workspace's own message document keeps it whole.
func TestSendFailedLogIsScrubbed(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	const provErr = "twilio replied 400: code 21610: Attempt to send to unsubscribed recipient +15550100000 (also lead@example.com)"
	e.Sender.Result = sender.Result{Status: sender.Failed, Error: provErr}
	r := e.Send(`{"channel":"sms","recipientPhone":"+1 555 010 0000","body":"x"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	id := r.JSON()["message"].(map[string]any)["id"].(string)
	stored := e.Do(http.MethodGet, "/api/messages/"+id, e.Key, "", nil).JSON()["message"].(map[string]any)
	if stored["error"] != provErr {
		t.Errorf("stored error = %q, want the provider's text whole", stored["error"])
	}
	var line map[string]any
	for _, l := range strings.Split(e.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["event"] == events.SendFailed {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no %s line in the log", events.SendFailed)
	}
	got, _ := line["error"].(string)
	if strings.Contains(got, "5550100000") || strings.Contains(got, "lead@example.com") || !strings.Contains(got, "code 21610") {
		t.Errorf("logged error = %q, want the number and address scrubbed and the rest kept", got)
	}
	if logs := e.Logs.String(); strings.Contains(logs, "5550100000") {
		t.Errorf("the recipient's number is in the log")
	}
}
