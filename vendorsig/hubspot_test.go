package vendorsig

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// HubSpot's own v2 example (legacydocs.hubspot.com/docs/faq/v2-request-validation).
func TestHubSpotV2DocumentedExample(t *testing.T) {
	const secret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	body := []byte(`{"example_field":"example_value"}`)
	got := hex.EncodeToString(HubSpotV2(secret, "POST", "https://www.example.com/webhook_uri", body))
	if want := "9569219f8ba981ffa6f6f16aa0f48637d35d728c7e4d93d0d52efaa512af7900"; got != want {
		t.Fatalf("v2 of HubSpot's example: %s, want %s", got, want)
	}
	hd := http.Header{}
	hd.Set(HeaderHubSpotSignature, got)
	hd.Set(HeaderHubSpotVersion, "v2")
	if r := HubSpot(secret, hd, "POST", "https://www.example.com/webhook_uri", body, time.Now()); r != "" {
		t.Errorf("the documented example is refused: %s", r)
	}
	for name, mutate := range map[string]func() (string, string, []byte, http.Header){
		"other body": func() (string, string, []byte, http.Header) {
			return secret, "https://www.example.com/webhook_uri", []byte(`{}`), hd
		},
		"other URL": func() (string, string, []byte, http.Header) {
			return secret, "https://evil.example.com/webhook_uri", body, hd
		},
		"other secret": func() (string, string, []byte, http.Header) {
			return "zzzz", "https://www.example.com/webhook_uri", body, hd
		},
		"v1 header": func() (string, string, []byte, http.Header) {
			h := hd.Clone()
			h.Set(HeaderHubSpotVersion, "v1")
			return secret, "https://www.example.com/webhook_uri", body, h
		},
		"no header": func() (string, string, []byte, http.Header) {
			return secret, "https://www.example.com/webhook_uri", body, http.Header{}
		},
	} {
		s, u, b, h := mutate()
		if r := HubSpot(s, h, "POST", u, b, time.Now()); r == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}

// v3: the HMAC over method, URI, body and timestamp, within 5 minutes.
func TestHubSpotV3(t *testing.T) {
	const secret, u = "app-client-secret-0123456789", "https://api.example.com/integrations/hubspot/ws/actions/send?a=%3A"
	body := []byte(`{"callbackId":"ap-1"}`)
	now := time.Now()
	sign := func(at time.Time) http.Header {
		ts := strconv.FormatInt(at.UnixMilli(), 10)
		hd := http.Header{}
		hd.Set(HeaderHubSpotTimestamp, ts)
		hd.Set(HeaderHubSpotSignatureV3, base64.StdEncoding.EncodeToString(HubSpotV3(secret, "POST", u, body, ts)))
		return hd
	}
	if r := HubSpot(secret, sign(now.Add(-time.Minute)), "POST", u, body, now); r != "" {
		t.Errorf("a fresh v3 call is refused: %s", r)
	}
	if r := HubSpot(secret, sign(now.Add(-6*time.Minute)), "POST", u, body, now); r != reasonStale {
		t.Errorf("a 6-minute-old v3 call: %q, want %q", r, reasonStale)
	}
	if r := HubSpot(secret, sign(now), "POST", u, []byte(`{"callbackId":"ap-2"}`), now); r != reasonMismatch {
		t.Errorf("a v3 call with another body: %q, want %q", r, reasonMismatch)
	}
	// The URI is signed with %3A decoded, as HubSpot's guide says.
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	if a, b := HubSpotV3(secret, "POST", u, body, ts), HubSpotV3(secret, "POST", "https://api.example.com/integrations/hubspot/ws/actions/send?a=:", body, ts); string(a) != string(b) {
		t.Error("%3A and : sign differently")
	}
}
