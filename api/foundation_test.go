package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestHealth(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.Do(http.MethodGet, path, "", "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, r.Status, r.Body)
		}
	}
}

func TestAuth(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	ok := `{"channel":"sms","recipientPhone":"+15550100001","body":"hi"}`
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"valid key", e.Key, http.StatusCreated},
		{"no key", "", http.StatusUnauthorized},
		{"unknown key", "mk_" + strings.Repeat("A", 43), http.StatusUnauthorized},
		{"admin token is not an API key", apitest.AdminToken, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(http.MethodPost, "/api/messages", tt.token, ok, nil)
			if r.Status != tt.want {
				t.Fatalf("status = %d (%s), want %d", r.Status, r.Body, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				assertProblem(t, r, "unauthorized")
			}
		})
	}
	if strings.Contains(e.Logs.String(), e.Key) {
		t.Error("the API key appears in the logs")
	}
}

func TestAdmin(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	if r := e.Do(http.MethodPost, "/admin/workspaces", "wrong", `{"name":"x"}`, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("wrong admin token: %d, want 401", r.Status)
	}
	if r := e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":""}`, nil); r.Status != http.StatusBadRequest {
		t.Errorf("empty name: %d, want 400", r.Status)
	}
	r := e.Do(http.MethodPost, "/admin/workspaces/"+e.WSID+"/keys", apitest.AdminToken, "", nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("new key: %d %s", r.Status, r.Body)
	}
	key, _ := r.JSON()["apiKey"].(string)
	send := e.Do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100002","body":"second key"}`, nil)
	if send.Status != http.StatusCreated {
		t.Errorf("send with the second key: %d %s", send.Status, send.Body)
	}
	if r := e.Do(http.MethodPost, "/admin/workspaces/ws_nope/keys", apitest.AdminToken, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("key for unknown workspace: %d, want 404", r.Status)
	}
	if strings.Contains(e.Logs.String(), key) {
		t.Error("a new API key appears in the logs")
	}
}

func TestRequestID(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	r := e.Do(http.MethodGet, "/healthz", "", "", map[string]string{"X-Request-Id": "abc-123"})
	if got := r.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed X-Request-Id = %q, want abc-123", got)
	}
	r = e.Do(http.MethodGet, "/healthz", "", "", nil)
	if got := r.Header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Errorf("generated X-Request-Id = %q, want req_...", got)
	}
	if !strings.Contains(e.Logs.String(), `"requestId":"abc-123"`) {
		t.Error("the request id is not in the log lines")
	}
}

func TestUnknownRouteIsProblem(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	r := e.Do(http.MethodGet, "/nope", "", "", nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("status %d", r.Status)
	}
	assertProblem(t, r, "not_found")
}

// assertProblem checks an RFC 9457 problem document with our extensions.
func assertProblem(t *testing.T, r apitest.Response, code string) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	p := r.JSON()
	if p["code"] != code || p["success"] != false || p["status"] != float64(r.Status) || p["title"] == "" || p["type"] == "" {
		t.Errorf("problem = %s, want code %q, success false, status %d, title and type", r.Body, code, r.Status)
	}
	return p
}
