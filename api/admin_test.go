package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/events"
)

// Changing a webhook secret through the admin API leaves an audit event
// that names the workspace and channel and never the secret; a refused
// change leaves none.
func TestSecretChangeIsAudited(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	const secret = "audit-test-twilio-token-0123456789"
	path := "/admin/workspaces/" + e.WSID + "/secrets/twilio"
	if r := e.Do(http.MethodPut, path, apitest.AdminToken, `{"secret":"`+secret+`"}`, nil); r.Status != http.StatusNoContent {
		t.Fatalf("PUT secret: %d %s", r.Status, r.Body)
	}
	var audits []map[string]any
	for _, line := range strings.Split(e.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == events.AdminSecretChanged {
			audits = append(audits, m)
		}
	}
	if len(audits) != 1 || audits[0]["workspaceId"] != e.WSID || audits[0]["channel"] != "twilio" {
		t.Errorf("audit events %v, want one %s with workspaceId %s and channel twilio", audits, events.AdminSecretChanged, e.WSID)
	}
	if strings.Contains(e.Logs.String(), secret) {
		t.Error("the secret reached the log")
	}

	for name, r := range map[string]apitest.Response{
		"unknown workspace": e.Do(http.MethodPut, "/admin/workspaces/ws_nope/secrets/twilio", apitest.AdminToken, `{"secret":"x"}`, nil),
		"empty secret":      e.Do(http.MethodPut, path, apitest.AdminToken, `{"secret":""}`, nil),
		"wrong token":       e.Do(http.MethodPut, path, "not-the-admin-token", `{"secret":"x"}`, nil),
	} {
		if r.Status < 400 {
			t.Errorf("%s: %d, want a refusal", name, r.Status)
		}
	}
	if n := strings.Count(e.Logs.String(), events.AdminSecretChanged); n != 1 {
		t.Errorf("%d audit events after refused changes, want still 1", n)
	}
}
