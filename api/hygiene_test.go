package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
)

// Issue 25 finding 7: bad input is refused with 400 naming the field, not
// repaired or stored. Invalid UTF-8 (a Latin-1 "é", byte 0xE9) would
// become U+FFFD on decoding; a NUL in a name, an unknown member and a
// one-byte signing secret were accepted.
func TestInputHygiene(t *testing.T) {
	e := apitest.New(t, apitest.Options{Events: true})
	admin := apitest.AdminToken
	ws := "/admin/workspaces/" + e.WSID
	for _, tt := range []struct {
		name, method, path, token, body, field string
	}{
		{"endpoint URL not UTF-8", http.MethodPost, "/api/webhook-endpoints", e.Key, "{\"url\":\"https://hooks.example.com/caf\xe9\",\"events\":[\"message.sent\"]}", ""},
		{"message body not UTF-8", http.MethodPost, "/api/messages", e.Key, "{\"channel\":\"sms\",\"recipientPhone\":\"+15550100000\",\"body\":\"caf\xe9\"}", ""},
		{"workspace name with NUL", http.MethodPost, "/admin/workspaces", admin, `{"name":"Acme\u0000Corp"}`, "name"},
		{"workspace name with a control character", http.MethodPost, "/admin/workspaces", admin, `{"name":"Acme\u001b[31m"}`, "name"},
		{"workspace unknown member", http.MethodPost, "/admin/workspaces", admin, `{"name":"Acme","plan":"pro"}`, "plan"},
		{"one-byte channel secret", http.MethodPut, ws + "/secrets/twilio", admin, `{"secret":"x"}`, "secret"},
		{"15-byte channel secret", http.MethodPut, ws + "/secrets/slack", admin, `{"secret":"0123456789abcde"}`, "secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(tt.method, tt.path, tt.token, tt.body, nil)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", r.Status, r.Body)
			}
			if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
				t.Errorf("Content-Type %q, want problem+json", r.Header.Get("Content-Type"))
			}
			if tt.field != "" && !strings.Contains(string(r.Body), `"field":"`+tt.field+`"`) {
				t.Errorf("answer %s does not name the field %s", r.Body, tt.field)
			}
		})
	}
	// Nothing of it was written: still one workspace, no endpoint.
	if n := e.CountDocs("workspaces"); n != 1 {
		t.Errorf("%d workspaces, want 1", n)
	}
	if r := e.Do(http.MethodGet, "/api/webhook-endpoints", e.Key, "", nil); !strings.Contains(string(r.Body), `"endpoints":[]`) && !strings.Contains(string(r.Body), `"data":[]`) {
		t.Errorf("endpoints after refused creates: %s", r.Body)
	}
	// A 16-byte secret is accepted.
	if r := e.Do(http.MethodPut, ws+"/secrets/slack", admin, `{"secret":"0123456789abcdef"}`, nil); r.Status != http.StatusNoContent {
		t.Errorf("16-byte secret: %d %s", r.Status, r.Body)
	}
}
