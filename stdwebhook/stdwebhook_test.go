package stdwebhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgapi/msgapi/stdwebhook"
)

// The published Standard Webhooks test vector (libraries/go/webhook_test.go
// and the other languages' suites in standard-webhooks/standard-webhooks).
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = 1614265330
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// A well-formed signature that matches nothing (from the same suite).
	otherSig = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

func mustParse(t *testing.T, s string) stdwebhook.Secret {
	t.Helper()
	sec, err := stdwebhook.ParseSecret(s)
	if err != nil {
		t.Fatalf("ParseSecret(%q): %v", s, err)
	}
	return sec
}

func TestSignVector(t *testing.T) {
	got := stdwebhook.Sign(mustParse(t, vecSecret), vecID, time.Unix(vecTS, 0), []byte(vecBody))
	if got != vecSig {
		t.Errorf("Sign = %s, want %s", got, vecSig)
	}
}

func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	stdwebhook.SetHeaders(h, mustParse(t, vecSecret), vecID, time.Unix(vecTS, 0), []byte(vecBody))
	want := map[string]string{"Webhook-Id": vecID, "Webhook-Timestamp": strconv.Itoa(vecTS), "Webhook-Signature": vecSig}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestVerify(t *testing.T) {
	sec := mustParse(t, vecSecret)
	at := time.Unix(vecTS, 0)
	headers := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{stdwebhook.HeaderID: id, stdwebhook.HeaderTimestamp: ts, stdwebhook.HeaderSignature: sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	ts := strconv.Itoa(vecTS)
	tests := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		want error
	}{
		{"vector", headers(vecID, ts, vecSig), vecBody, at, nil},
		{"within tolerance, late", headers(vecID, ts, vecSig), vecBody, at.Add(stdwebhook.Tolerance), nil},
		{"within tolerance, early", headers(vecID, ts, vecSig), vecBody, at.Add(-stdwebhook.Tolerance), nil},
		{"rotation: one of several matches", headers(vecID, ts, otherSig+" v2,"+vecSig[3:]+" "+vecSig+" "+otherSig), vecBody, at, nil},
		{"too old", headers(vecID, ts, vecSig), vecBody, at.Add(stdwebhook.Tolerance + time.Second), stdwebhook.ErrStale},
		{"too new", headers(vecID, ts, vecSig), vecBody, at.Add(-stdwebhook.Tolerance - time.Second), stdwebhook.ErrStale},
		{"body changed", headers(vecID, ts, vecSig), vecBody + " ", at, stdwebhook.ErrNoMatch},
		{"id changed", headers("msg_other", ts, vecSig), vecBody, at, stdwebhook.ErrNoMatch},
		{"timestamp changed", headers(vecID, strconv.Itoa(vecTS+1), vecSig), vecBody, at, stdwebhook.ErrNoMatch},
		{"wrong signature", headers(vecID, ts, otherSig), vecBody, at, stdwebhook.ErrNoMatch},
		{"v2 is not v1", headers(vecID, ts, "v2,"+vecSig[3:]), vecBody, at, stdwebhook.ErrNoMatch},
		{"bare base64 without version", headers(vecID, ts, vecSig[3:]), vecBody, at, stdwebhook.ErrNoMatch},
		{"no id", headers("", ts, vecSig), vecBody, at, stdwebhook.ErrMissingHeaders},
		{"no timestamp", headers(vecID, "", vecSig), vecBody, at, stdwebhook.ErrMissingHeaders},
		{"no signature", headers(vecID, ts, ""), vecBody, at, stdwebhook.ErrMissingHeaders},
		{"timestamp not a number", headers(vecID, "yesterday", vecSig), vecBody, at, stdwebhook.ErrBadTimestamp},
		{"timestamp in milliseconds", headers(vecID, ts+"000", vecSig), vecBody, at, stdwebhook.ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stdwebhook.Verify(sec, tt.h, []byte(tt.body), tt.now, stdwebhook.Tolerance)
			if !errors.Is(got, tt.want) || (tt.want == nil) != (got == nil) {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	tests := []struct {
		name, secret string
		wantErr      bool
	}{
		{"vector (24 bytes)", vecSecret, false},
		{"64 bytes", "whsec_" + b64(64), false},
		{"legacy raw string", "correct horse battery staple", false},
		{"legacy base64-looking string stays raw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"surrounding space trimmed", "  " + vecSecret + "\n", false},
		{"empty", "", true},
		{"blank", " \t", true},
		{"whsec_ with nothing", "whsec_", true},
		{"whsec_ not base64", "whsec_not*base64", true},
		{"whsec_ too short", "whsec_" + b64(16), true},
		{"whsec_ too long", "whsec_" + b64(65), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stdwebhook.ParseSecret(tt.secret)
			if (err != nil) != tt.wantErr {
				t.Errorf("ParseSecret(%q) error = %v, want error %v", tt.secret, err, tt.wantErr)
			}
		})
	}
}

// A legacy secret's key is its UTF-8 bytes, and surrounding space trimmed
// leaves the same key: what the README promises operators.
func TestLegacySecretKey(t *testing.T) {
	const raw = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // base64-shaped but unprefixed: raw
	mac := hmac.New(sha256.New, []byte(raw))
	fmt.Fprintf(mac, "%s.%d.%s", vecID, vecTS, vecBody)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range []string{raw, " " + raw + "\n"} {
		if got := stdwebhook.Sign(mustParse(t, s), vecID, time.Unix(vecTS, 0), []byte(vecBody)); got != want {
			t.Errorf("Sign with legacy %q = %s, want %s", s, got, want)
		}
	}
	if got := stdwebhook.Sign(mustParse(t, "whsec_"+raw), vecID, time.Unix(vecTS, 0), []byte(vecBody)); got == want {
		t.Errorf("whsec_ form signed with the raw string as key; want the decoded bytes")
	}
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		s := stdwebhook.NewSecret()
		b64, ok := strings.CutPrefix(s, stdwebhook.Prefix)
		if !ok {
			t.Fatalf("NewSecret() = %q, want prefix %q", s, stdwebhook.Prefix)
		}
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(k) != 32 {
			t.Fatalf("NewSecret() = %q: %d bytes, %v; want 32 bytes of standard base64", s, len(k), err)
		}
		if seen[s] {
			t.Fatalf("NewSecret() repeated %q", s)
		}
		seen[s] = true
		mustParse(t, s)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	sec := mustParse(t, vecSecret)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(vecSecret, stdwebhook.Prefix))
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(f, sec)
		if strings.Contains(out, "MfKQ9r8G") || strings.Contains(out, fmt.Sprint(key)) || strings.Contains(out, string(key)) {
			t.Errorf("fmt %s printed the key: %q", f, out)
		}
	}
}
