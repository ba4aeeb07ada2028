package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.do(http.MethodGet, path, "", "", nil); r.status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, r.status, r.body)
		}
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, envOpts{})
	ok := `{"channel":"sms","recipientPhone":"+15550100001","body":"hi"}`
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"valid key", e.key, http.StatusCreated},
		{"no key", "", http.StatusUnauthorized},
		{"unknown key", "mk_" + strings.Repeat("A", 43), http.StatusUnauthorized},
		{"admin token is not an API key", adminToken, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodPost, "/api/messages", tt.token, ok, nil)
			if r.status != tt.want {
				t.Fatalf("status = %d (%s), want %d", r.status, r.body, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				assertProblem(t, r, "unauthorized")
			}
		})
	}
	if strings.Contains(e.logs.String(), e.key) {
		t.Error("the API key appears in the logs")
	}
}

func TestAdmin(t *testing.T) {
	e := newEnv(t, envOpts{})
	if r := e.do(http.MethodPost, "/admin/workspaces", "wrong", `{"name":"x"}`, nil); r.status != http.StatusUnauthorized {
		t.Errorf("wrong admin token: %d, want 401", r.status)
	}
	if r := e.do(http.MethodPost, "/admin/workspaces", adminToken, `{"name":""}`, nil); r.status != http.StatusBadRequest {
		t.Errorf("empty name: %d, want 400", r.status)
	}
	r := e.do(http.MethodPost, "/admin/workspaces/"+e.wsID+"/keys", adminToken, "", nil)
	if r.status != http.StatusCreated {
		t.Fatalf("new key: %d %s", r.status, r.body)
	}
	key, _ := r.json()["apiKey"].(string)
	send := e.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100002","body":"second key"}`, nil)
	if send.status != http.StatusCreated {
		t.Errorf("send with the second key: %d %s", send.status, send.body)
	}
	if r := e.do(http.MethodPost, "/admin/workspaces/ws_nope/keys", adminToken, "", nil); r.status != http.StatusNotFound {
		t.Errorf("key for unknown workspace: %d, want 404", r.status)
	}
	if strings.Contains(e.logs.String(), key) {
		t.Error("a new API key appears in the logs")
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do(http.MethodGet, "/healthz", "", "", map[string]string{"X-Request-Id": "abc-123"})
	if got := r.header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed X-Request-Id = %q, want abc-123", got)
	}
	r = e.do(http.MethodGet, "/healthz", "", "", nil)
	if got := r.header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Errorf("generated X-Request-Id = %q, want req_...", got)
	}
	if !strings.Contains(e.logs.String(), `"requestId":"abc-123"`) {
		t.Error("the request id is not in the log lines")
	}
}

func TestUnknownRouteIsProblem(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do(http.MethodGet, "/nope", "", "", nil)
	if r.status != http.StatusNotFound {
		t.Fatalf("status %d", r.status)
	}
	assertProblem(t, r, "not_found")
}

// assertProblem checks an RFC 9457 problem document with our extensions.
func assertProblem(t *testing.T, r response, code string) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	p := r.json()
	if p["code"] != code || p["success"] != false || p["status"] != float64(r.status) || p["title"] == "" || p["type"] == "" {
		t.Errorf("problem = %s, want code %q, success false, status %d, title and type", r.body, code, r.status)
	}
	return p
}
