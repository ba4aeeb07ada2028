package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// The README's configuration table lists every setting with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, s := range settings {
		def := "—"
		if s.def != "" {
			def = "`" + s.def + "`"
		}
		row := "| `" + s.env + "` | `-" + s.flag + "` | " + def + " |"
		if !strings.Contains(readme, row) {
			t.Errorf("README lacks the row %q", row)
		}
	}
}

func TestSettingsPrecedence(t *testing.T) {
	env := map[string]string{"MSGAPI_ADDR": ":9000", "MSGAPI_DEDUP_WAIT": "1s"}
	v, rest, err := loadValues("t", []string{"-dedup-wait", "2s", "extra"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if v["MSGAPI_ADDR"] != ":9000" || v["MSGAPI_DEDUP_WAIT"] != "2s" || v["MSGAPI_DEDUP_WINDOW"] != "15m" {
		t.Errorf("addr=%q wait=%q window=%q, want env :9000, flag 2s, default 15m", v["MSGAPI_ADDR"], v["MSGAPI_DEDUP_WAIT"], v["MSGAPI_DEDUP_WINDOW"])
	}
	if len(rest) != 1 || rest[0] != "extra" {
		t.Errorf("rest = %v", rest)
	}
}

func TestInvalidSettingsAreNamed(t *testing.T) {
	v, _, err := loadValues("t", nil, func(k string) string {
		return map[string]string{"MSGAPI_DEDUP_WINDOW": "soon", "MSGAPI_SMTP_PORT": "x", "MSGAPI_DEDUP_LEASE": "0s"}[k]
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseConfig(v)
	if err == nil {
		t.Fatal("parseConfig accepted invalid settings")
	}
	for _, want := range []string{"MSGAPI_DEDUP_WINDOW", "MSGAPI_SMTP_PORT", "MSGAPI_DEDUP_LEASE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestUnknownSenderRefused(t *testing.T) {
	v, _, _ := loadValues("t", []string{"-sender-sms", "carrier-pigeon"}, func(string) string { return "" }, &bytes.Buffer{})
	c, err := parseConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildSenders(c, newLogger(&bytes.Buffer{}, "info")); err == nil || !strings.Contains(err.Error(), "MSGAPI_SENDER_SMS") {
		t.Errorf("buildSenders error = %v, want it to name MSGAPI_SENDER_SMS", err)
	}
}

// A key lease or shutdown timeout no longer than a request can run is
// refused at start-up: a retry could settle a live request's key, and
// shutdown could cut a provider call off.
func TestLeaseAndShutdownMustOutlastARequest(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MSGAPI_IDEMPOTENCY_LEASE": "20s"}, "MSGAPI_IDEMPOTENCY_LEASE"},
		{map[string]string{"MSGAPI_SHUTDOWN_TIMEOUT": "20s"}, "MSGAPI_SHUTDOWN_TIMEOUT"},
		{map[string]string{"MSGAPI_SEND_TIMEOUT": "1m"}, "MSGAPI_IDEMPOTENCY_LEASE"},
		{map[string]string{"MSGAPI_SEND_TIMEOUT": "1s", "MSGAPI_IDEMPOTENCY_LEASE": "45s", "MSGAPI_SHUTDOWN_TIMEOUT": "45s"}, ""},
	} {
		v, _, err := loadValues("t", nil, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseConfig(v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
}

func TestLokiBufferBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 16 << 20, false}, // the default
		{"1048576", 1 << 20, false},
		{"512KiB", 512 << 10, false},
		{"64MiB", 64 << 20, false},
		{"64KiB", 64 << 10, false},
		{"1KiB", 0, true}, // smaller than a few capped lines
		{"16MB", 0, true},
		{"-1", 0, true},
		{"lots", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, _, err := loadValues("t", nil, func(k string) string {
				return map[string]string{"MSGAPI_LOKI_BUFFER_BYTES": tt.in}[k]
			}, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseConfig(v)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "MSGAPI_LOKI_BUFFER_BYTES") {
					t.Errorf("error = %v, want one naming MSGAPI_LOKI_BUFFER_BYTES", err)
				}
				return
			}
			if err != nil || c.lokiBufferBytes != tt.want {
				t.Errorf("lokiBufferBytes = %d, %v; want %d", c.lokiBufferBytes, err, tt.want)
			}
		})
	}
}

func TestRateLimitSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" for valid
	}{
		{map[string]string{}, ""},
		{map[string]string{"MSGAPI_RATE_LIMIT": "0", "MSGAPI_RATE_BURST": "0"}, ""},
		{map[string]string{"MSGAPI_RATE_LIMIT": "fast"}, "MSGAPI_RATE_LIMIT"},
		{map[string]string{"MSGAPI_RATE_LIMIT": "5", "MSGAPI_RATE_BURST": "0"}, "MSGAPI_RATE_BURST"},
		{map[string]string{"MSGAPI_RATE_BURST": "-1"}, "MSGAPI_RATE_BURST"},
	} {
		v, _, err := loadValues("t", nil, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig(v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.want)
		case len(tc.env) == 0 && (c.rateLimit.PerSecond != 20 || c.rateLimit.Burst != 40 || c.keyCacheTTL.String() != "5s"):
			t.Errorf("defaults: rate %+v, key cache TTL %v; want 20/s burst 40, 5s", c.rateLimit, c.keyCacheTTL)
		}
	}
}

// The test-only switches are refused unless MSGAPI_ENV=test, and then shift
// the guard's clock and turn the fence off.
func TestTestSwitchesOnlyInTests(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		wantErr    string
		wantOffset time.Duration
		unfenced   bool
	}{
		{map[string]string{"MSGAPI_TEST_CLOCK_OFFSET": "5s"}, "tests only", 0, false},
		{map[string]string{"MSGAPI_TEST_UNFENCED": "1", "MSGAPI_ENV": "production"}, "tests only", 0, false},
		{map[string]string{"MSGAPI_TEST_UNFENCED": "yes", "MSGAPI_ENV": "test"}, "MSGAPI_TEST_UNFENCED", 0, false},
		{map[string]string{"MSGAPI_TEST_CLOCK_OFFSET": "-5s", "MSGAPI_TEST_UNFENCED": "1", "MSGAPI_ENV": "test"}, "", -5 * time.Second, true},
		{map[string]string{}, "", 0, false},
	} {
		v, _, err := loadValues("t", nil, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig(v)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		got := time.Until(c.testClock()())
		if d := got - tc.wantOffset; d < -time.Second || d > time.Second {
			t.Errorf("%v: clock offset %s, want %s", tc.env, got, tc.wantOffset)
		}
		if c.testUnfenced != tc.unfenced {
			t.Errorf("%v: unfenced %v, want %v", tc.env, c.testUnfenced, tc.unfenced)
		}
	}
}
