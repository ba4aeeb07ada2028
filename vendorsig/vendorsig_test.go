package vendorsig

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// The vendors' own published examples, so the schemes are checked against
// an independent reference rather than against our own signer.
func TestSignatureVectors(t *testing.T) {
	t.Run("slack", func(t *testing.T) {
		// docs.slack.dev/authentication/verifying-requests-from-slack
		const (
			secret = "8f742231b10e8888abcd99yyyzzz85a5"
			ts     = "1531420618"
			body   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
			want   = "a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
		)
		if got := hex.EncodeToString(SlackSignature(secret, ts, []byte(body))); got != want {
			t.Errorf("SlackSignature = %s, want %s", got, want)
		}
		hd := http.Header{}
		hd.Set(headerSlackSignature, "v0="+want)
		hd.Set(headerSlackTimestamp, ts)
		if r := Slack(secret, hd, []byte(body), time.Unix(1531420618, 0).Add(time.Minute)); r != "" {
			t.Errorf("Slack(documented request) = %q, want valid", r)
		}
	})
	t.Run("twilio", func(t *testing.T) {
		// Twilio's RequestValidator test vectors (all official helper libraries).
		const u = "https://mycompany.com/myapp.php?foo=1&bar=2"
		params := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
			"From": {"+14158675309"}, "To": {"+18005551212"}}
		if got := base64.StdEncoding.EncodeToString(TwilioSignature("12345", u, params)); got != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" {
			t.Errorf("TwilioSignature = %s, want RSOYDt4T1cUTdK1PDd93/VVr8B8=", got)
		}
		repeated := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
		if got := base64.StdEncoding.EncodeToString(TwilioSignature("12345", u, repeated)); got != "IK+Dwps556ElfBT0I3Rgjkr1wJU=" {
			t.Errorf("TwilioSignature(repeated params) = %s, want IK+Dwps556ElfBT0I3Rgjkr1wJU=", got)
		}
	})
}

func TestVerifySlack(t *testing.T) {
	const secret = "shh"
	body := []byte(`{"type":"event_callback"}`)
	now := time.Unix(1_700_000_000, 0)
	sign := func(ts int64) http.Header {
		s := strconv.FormatInt(ts, 10)
		hd := http.Header{}
		hd.Set(headerSlackTimestamp, s)
		hd.Set(headerSlackSignature, "v0="+hex.EncodeToString(SlackSignature(secret, s, body)))
		return hd
	}
	tests := []struct {
		name string
		hd   http.Header
		want string
	}{
		{"valid", sign(now.Unix()), ""},
		{"4m59s old", sign(now.Add(-4*time.Minute - 59*time.Second).Unix()), ""},
		{"6 minutes old", sign(now.Add(-6 * time.Minute).Unix()), reasonStale},
		{"6 minutes ahead", sign(now.Add(6 * time.Minute).Unix()), reasonStale},
		{"no signature", http.Header{headerSlackTimestamp: {"1700000000"}}, reasonMissing},
		{"no timestamp", http.Header{headerSlackSignature: {"v0=00"}}, reasonTimestampMissing},
		{"wrong version", http.Header{headerSlackTimestamp: {"1700000000"}, headerSlackSignature: {"v1=00"}}, reasonMalformed},
		{"not hex", http.Header{headerSlackTimestamp: {"1700000000"}, headerSlackSignature: {"v0=zz"}}, reasonMalformed},
		{"timestamp moved", func() http.Header { h := sign(now.Unix()); h.Set(headerSlackTimestamp, "1700000001"); return h }(), reasonMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Slack(secret, tt.hd, body, now); got != tt.want {
				t.Errorf("Slack = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVerifyTwilioPortVariants(t *testing.T) {
	const secret = "tok"
	body := "MessageSid=SM1&From=%2B15550100000&Body=hi"
	params, _ := url.ParseQuery(body)
	tests := []struct {
		name, signed, seen string
		ok                 bool
	}{
		{"same URL", "https://a.example/hook?x=1", "https://a.example/hook?x=1", true},
		{"signed with default port", "https://a.example:443/hook", "https://a.example/hook", true},
		{"signed without port, seen with", "https://a.example/hook", "https://a.example:443/hook", true},
		{"other port", "https://a.example:8443/hook", "https://a.example/hook", false},
		{"other scheme", "http://a.example/hook", "https://a.example/hook", false},
		{"other query", "https://a.example/hook?x=2", "https://a.example/hook?x=1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hd := http.Header{}
			hd.Set("Content-Type", "application/x-www-form-urlencoded")
			hd.Set(headerTwilioSignature, base64.StdEncoding.EncodeToString(TwilioSignature(secret, tt.signed, params)))
			got := Twilio(secret, hd, tt.seen, []byte(body))
			if (got == "") != tt.ok {
				t.Errorf("Twilio = %q, want ok=%v", got, tt.ok)
			}
		})
	}
}

func TestVerifyTelegramAndRelay(t *testing.T) {
	if r := Telegram("s3cret", http.Header{headerTelegramSecret: {"s3cret"}}); r != "" {
		t.Errorf("telegram: right token refused: %q", r)
	}
	for _, tok := range []string{"s3creT", "s3cret ", "", "s3cre"} {
		if r := Telegram("s3cret", http.Header{headerTelegramSecret: {tok}}); r == "" {
			t.Errorf("telegram: token %q accepted", tok)
		}
	}
	if r := RetiredRelay(http.Header{headerRelaySignature: {"sha256=00"}}); r == "" {
		t.Error("relay: the retired X-Msgapi-Signature was not refused")
	}
	if r := RetiredRelay(http.Header{}); r != "" {
		t.Errorf("relay: refused without the retired header: %q", r)
	}
}

func TestRequestURL(t *testing.T) {
	proxies, err := ParseProxies(" 10.1.0.0/16, 192.0.2.7 ,::1")
	if err != nil {
		t.Fatal(err)
	}
	spoofed := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.example"}}
	tests := []struct {
		name, base, peer string
		proxies          []netip.Prefix
		hd               http.Header
		want             string
	}{
		{"direct", "", "203.0.113.5:4000", proxies, nil, "http://10.0.0.1:8080/api/webhooks/ws/twilio?a=1"},
		{"behind a trusted proxy", "", "10.1.2.3:4000", proxies, http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"api.example.com"}}, "https://api.example.com/api/webhooks/ws/twilio?a=1"},
		{"trusted single address", "", "192.0.2.7:4000", proxies, http.Header{"X-Forwarded-Proto": {"https"}}, "https://10.0.0.1:8080/api/webhooks/ws/twilio?a=1"},
		{"trusted IPv6 loopback", "", "[::1]:4000", proxies, http.Header{"X-Forwarded-Host": {"api.example.com"}}, "http://api.example.com/api/webhooks/ws/twilio?a=1"},
		// Issue 25 finding 8: a trusted proxy that appends puts its value
		// last; what comes before it is whatever the client sent.
		{"a client's value before the proxy's", "", "10.1.2.3:4000", proxies, http.Header{"X-Forwarded-Proto": {"http, https"}, "X-Forwarded-Host": {"evil.example, api.example.com"}}, "https://api.example.com/api/webhooks/ws/twilio?a=1"},
		{"a client's value as a second header line", "", "10.1.2.3:4000", proxies, http.Header{"X-Forwarded-Host": {"evil.example", "api.example.com"}}, "http://api.example.com/api/webhooks/ws/twilio?a=1"},
		// Two trusted hops (X-Forwarded-For names the outer one, 10.1.0.8):
		// the outer proxy's value is the one the client's Host became.
		{"proxy chain: the outermost trusted hop wins", "", "10.1.0.9:1", proxies, http.Header{"X-Forwarded-For": {"203.0.113.5, 10.1.0.8"}, "X-Forwarded-Proto": {"https, http"}, "X-Forwarded-Host": {"api.example.com, lb.internal"}}, "https://api.example.com/api/webhooks/ws/twilio?a=1"},
		{"proxy chain under a client's values", "", "10.1.0.9:1", proxies, http.Header{"X-Forwarded-For": {"198.51.100.1, 203.0.113.5, 10.1.0.8"}, "X-Forwarded-Proto": {"http, https, http"}, "X-Forwarded-Host": {"evil.example, api.example.com, lb.internal"}}, "https://api.example.com/api/webhooks/ws/twilio?a=1"},
		{"an untrusted hop in X-Forwarded-For stops the count", "", "10.1.0.9:1", proxies, http.Header{"X-Forwarded-For": {"10.1.0.8, 203.0.113.5"}, "X-Forwarded-Host": {"evil.example, api.example.com"}}, "http://api.example.com/api/webhooks/ws/twilio?a=1"},
		{"spoofed by an untrusted peer", "", "203.0.113.5:4000", proxies, spoofed, "http://10.0.0.1:8080/api/webhooks/ws/twilio?a=1"},
		{"next to a trusted range", "", "10.2.0.1:4000", proxies, spoofed, "http://10.0.0.1:8080/api/webhooks/ws/twilio?a=1"},
		{"no trusted proxies configured", "", "10.1.2.3:4000", nil, spoofed, "http://10.0.0.1:8080/api/webhooks/ws/twilio?a=1"},
		{"configured origin beats a trusted proxy", "https://hooks.example.com/", "10.1.2.3:4000", proxies, spoofed, "https://hooks.example.com/api/webhooks/ws/twilio?a=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://10.0.0.1:8080/api/webhooks/ws/twilio?a=1", nil)
			r.RequestURI = "/api/webhooks/ws/twilio?a=1"
			r.RemoteAddr = tt.peer
			for k, v := range tt.hd {
				r.Header[k] = v
			}
			if got := RequestURL(r, tt.base, tt.proxies); got != tt.want {
				t.Errorf("RequestURL = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseProxies(t *testing.T) {
	got, err := ParseProxies("10.0.0.0/8, 127.0.0.1,::ffff:192.0.2.1, fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "192.0.2.1/32", "fd00::/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("prefix %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8;"} {
		if _, err := ParseProxies(bad); err == nil {
			t.Errorf("ParseProxies(%q) accepted", bad)
		}
	}
}
