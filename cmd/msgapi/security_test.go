package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/msgapi/msgapi/sender"
)

func configFrom(t *testing.T, env map[string]string) (config, error) {
	t.Helper()
	v, _, err := loadValues("t", nil, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	return parseConfig(v)
}

// The admin token is trimmed as a presented token is, and a short one is
// refused at start-up without being quoted.
func TestAdminToken(t *testing.T) {
	tests := []struct {
		name, token, want, wantErr string
	}{
		{"unset: admin API off", "", "", ""},
		{"trimmed", "  0123456789abcdef\n", "0123456789abcdef", ""},
		{"15 characters", "0123456789abcde", "", "MSGAPI_ADMIN_TOKEN is 15 characters"},
		{"short once trimmed", " \t0123456789abc \n", "", "MSGAPI_ADMIN_TOKEN is 13 characters"},
		{"blank", "   ", "", "MSGAPI_ADMIN_TOKEN is 0 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := configFrom(t, map[string]string{"MSGAPI_ADMIN_TOKEN": tt.token})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.TrimSpace(tt.token) != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.token)) {
					t.Errorf("the error quotes the token: %v", err)
				}
				return
			}
			if err != nil || c.adminToken != tt.want {
				t.Errorf("adminToken = %q, %v; want %q", c.adminToken, err, tt.want)
			}
		})
	}
}

// A provider secret read from the environment is trimmed too: a token
// pasted with a trailing newline authenticates as the token.
func TestProviderSecretsTrimmed(t *testing.T) {
	var mu sync.Mutex
	var gotPassword string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pw, _ := r.BasicAuth()
		mu.Lock()
		gotPassword = pw
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sid":"SM1","status":"queued"}`))
	}))
	defer srv.Close()
	c, err := configFrom(t, map[string]string{
		"MSGAPI_SENDER_SMS": "twilio", "MSGAPI_TWILIO_BASE_URL": srv.URL, "MSGAPI_TWILIO_ACCOUNT_SID": "AC1",
		"MSGAPI_TWILIO_AUTH_TOKEN": "twilio-token\n", "MSGAPI_TWILIO_FROM": "+15550100000",
	})
	if err != nil {
		t.Fatal(err)
	}
	senders, err := buildSenders(c, newLogger(&bytes.Buffer{}, "info"))
	if err != nil {
		t.Fatal(err)
	}
	senders["sms"].Send(context.Background(), sender.Message{ID: "msg_1", Channel: "sms", RecipientPhone: "+15550100001", Body: "hi"})
	mu.Lock()
	defer mu.Unlock()
	if gotPassword != "twilio-token" {
		t.Errorf("Twilio saw auth token %q, want it trimmed to %q", gotPassword, "twilio-token")
	}
}

// http:// provider URLs: refused outside development unless loopback;
// allowed with a loud warning in development and for loopback.
func TestPlainHTTPProviderURLs(t *testing.T) {
	tests := []struct {
		name, env, setting, url string
		refused, warned         bool
	}{
		{"https", "production", "MSGAPI_WEBHOOK_URL", "https://relay.example.com/send", false, false},
		{"http to a host, production", "production", "MSGAPI_WEBHOOK_URL", "http://relay.example.com/send", true, false},
		{"http to an IP, staging", "staging", "MSGAPI_TWILIO_BASE_URL", "http://203.0.113.9:8080", true, false},
		{"http to a host, development", "development", "MSGAPI_TWILIO_BASE_URL", "http://relay.example.com", false, true},
		{"http to loopback, production", "production", "MSGAPI_WEBHOOK_URL", "http://127.0.0.1:9000/send", false, true},
		{"http to localhost, production", "production", "MSGAPI_TWILIO_BASE_URL", "http://localhost:9000", false, true},
		{"http to ::1, production", "production", "MSGAPI_WEBHOOK_URL", "http://[::1]:9000/send", false, true},
		{"HTTP upper case, production", "production", "MSGAPI_WEBHOOK_URL", "HTTP://relay.example.com/send", true, false},
		// Issue 25 finding 9: the default is the safe one (it was
		// development, where this only warned).
		{"http to a host, MSGAPI_ENV unset", "", "MSGAPI_WEBHOOK_URL", "http://relay.example.com/send", true, false},
		{"http to loopback, MSGAPI_ENV unset", "", "MSGAPI_WEBHOOK_URL", "http://127.0.0.1:9000/send", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"MSGAPI_ENV": tt.env, "MSGAPI_WEBHOOK_SECRET": "s", "MSGAPI_TWILIO_ACCOUNT_SID": "AC1",
				"MSGAPI_TWILIO_AUTH_TOKEN": "t", "MSGAPI_TWILIO_FROM": "+15550100000", tt.setting: tt.url}
			if tt.env == "" {
				delete(env, "MSGAPI_ENV")
			}
			if tt.setting == "MSGAPI_WEBHOOK_URL" {
				env["MSGAPI_SENDER_SMS"] = "webhook"
			} else {
				env["MSGAPI_SENDER_SMS"] = "twilio"
			}
			c, err := configFrom(t, env)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			_, err = buildSenders(c, newLogger(&logs, "info"))
			if refused := err != nil; refused != tt.refused {
				t.Fatalf("refused = %v (%v), want %v", refused, err, tt.refused)
			}
			if tt.refused && !strings.Contains(err.Error(), tt.setting) {
				t.Errorf("error %q does not name %s", err, tt.setting)
			}
			if warned := strings.Contains(strings.ToLower(logs.String()), "plain http"); warned != tt.warned {
				t.Errorf("warned = %v, want %v; logs:\n%s", warned, tt.warned, logs.String())
			}
		})
	}
}

func TestSecuritySettingsRefused(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"short secret key":          {"MSGAPI_SECRET_KEY": "c2hvcnQ="},
		"previous without key":      {"MSGAPI_SECRET_KEY_PREVIOUS": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},
		"proxy that is no CIDR":     {"MSGAPI_TRUSTED_PROXIES": "10.0.0.0/8, lb.internal"},
		"engine on every interface": {"MSGAPI_EMBEDDED_ADDR": "0.0.0.0:27018"},
		"engine on a LAN address":   {"MSGAPI_EMBEDDED_ADDR": "192.168.1.10:27018"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := configFrom(t, env); err == nil {
				t.Error("accepted")
			}
		})
	}
	c, err := configFrom(t, map[string]string{"MSGAPI_SECRET_KEY": " AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "MSGAPI_TRUSTED_PROXIES": "10.0.0.0/8,127.0.0.1"})
	if err != nil || !c.keyring.Enabled() || len(c.proxies) != 2 {
		t.Errorf("valid settings: keyring %v, proxies %v, err %v", c.keyring.Enabled(), c.proxies, err)
	}
}

// With MSGAPI_ENV unset, the development-only switches are refused at
// start-up (issue 25 finding 9: development is the opt-in, not the default).
func TestDevelopmentSwitchesNeedTheOptIn(t *testing.T) {
	for _, setting := range []string{"MSGAPI_EGRESS_ALLOW_LOOPBACK", "MSGAPI_EVENTS_ALLOW_HTTP"} {
		if _, err := configFrom(t, map[string]string{setting: "true"}); err == nil || !strings.Contains(err.Error(), setting) {
			t.Errorf("%s=true with MSGAPI_ENV unset: %v, want refused naming it", setting, err)
		}
		if _, err := configFrom(t, map[string]string{setting: "true", "MSGAPI_ENV": "development"}); err != nil {
			t.Errorf("%s=true with MSGAPI_ENV=development: %v, want accepted", setting, err)
		}
	}
}
