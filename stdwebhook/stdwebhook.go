// Package stdwebhook signs and verifies HTTP calls under the Standard
// Webhooks scheme (standardwebhooks.com): headers webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature, whose value is
// "v1," + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), several
// space-separated when a secret is being rotated.
//
// Every Standard Webhooks signature msgapi makes or checks goes through
// here: it signs the webhook provider's calls (sender.Webhook) and event
// webhook deliveries (notify), and verifies the email relay's inbound
// webhooks and delivery receipts (through vendorsig, which inbound and
// receipts call), so receivers can use any Standard Webhooks library. (Vendors' own schemes —
// Slack, Twilio, Telegram — are not this one.) The MAC itself is the official Go library's;
// this package adds what it leaves to the caller: secrets in both forms
// msgapi accepts, an injected clock and tolerance, and errors a handler can
// tell apart.
package stdwebhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The three headers of a signed call.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Tolerance is how far a receiver lets webhook-timestamp drift from its
// clock, either way, before it refuses the call as a possible replay.
const Tolerance = 5 * time.Minute

// Prefix marks a secret in the standard form: Prefix + base64 of the key.
const Prefix = "whsec_"

// Key sizes the standard allows for whsec_ secrets, and the size NewSecret
// generates.
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
	keyBytes    = 32
)

// Errors Verify returns, so a handler can say why a call was refused.
var (
	ErrMissingHeaders = errors.New("webhook-id, webhook-timestamp or webhook-signature header missing")
	ErrBadTimestamp   = errors.New("webhook-timestamp is not a Unix time in seconds")
	ErrStale          = errors.New("webhook-timestamp outside the tolerance")
	ErrNoMatch        = errors.New("no webhook-signature matches")
)

// Secret is a parsed signing key. Its zero value is not usable; it never
// prints its key.
type Secret struct {
	wh *standardwebhooks.Webhook
}

// ParseSecret accepts both forms msgapi has known:
//
//   - "whsec_" + standard base64 of 24–64 random bytes: the HMAC key is the
//     decoded bytes (the standard form, what NewSecret makes);
//   - anything else (a legacy secret from before Standard Webhooks): the HMAC
//     key is the secret's UTF-8 bytes, exactly as given.
//
// Leading and trailing white space is trimmed first, as from an environment
// variable. An empty secret is an error, never a key.
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Secret{}, errors.New("stdwebhook: empty secret")
	}
	key := []byte(s)
	if b64, ok := strings.CutPrefix(s, Prefix); ok {
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return Secret{}, errors.New("stdwebhook: a whsec_ secret must be whsec_ + standard base64")
		}
		if len(k) < MinKeyBytes || len(k) > MaxKeyBytes {
			return Secret{}, fmt.Errorf("stdwebhook: a whsec_ secret must encode %d–%d bytes, not %d", MinKeyBytes, MaxKeyBytes, len(k))
		}
		key = k
	}
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return Secret{}, fmt.Errorf("stdwebhook: %w", err)
	}
	return Secret{wh: wh}, nil
}

// NewSecret returns a fresh standard secret: "whsec_" + base64 of 32 random
// bytes.
func NewSecret() string {
	var k [keyBytes]byte
	_, _ = rand.Read(k[:]) // never fails on supported platforms (crypto/rand docs)
	return Prefix + base64.StdEncoding.EncodeToString(k[:])
}

// String hides the key from fmt and loggers.
func (Secret) String() string { return "stdwebhook.Secret(redacted)" }

// GoString hides the key from %#v.
func (s Secret) GoString() string { return s.String() }

// Sign returns one signature, "v1,<base64>", over id, ts (whole seconds) and
// the exact body bytes. To sign with several secrets while one is rotated,
// join their signatures with a space.
func Sign(secret Secret, id string, ts time.Time, body []byte) string {
	if secret.wh == nil {
		panic("stdwebhook: Sign with a zero Secret")
	}
	sig, _ := secret.wh.Sign(id, ts, body) // never fails
	return sig
}

// SetHeaders sets the three headers of a call signed with secret at ts. The
// caller keeps id the same across every retry of one message, so receivers
// can de-duplicate on it, and takes a fresh ts at each attempt.
func SetHeaders(h http.Header, secret Secret, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(secret, id, ts, body))
}

// Verify checks a received call: all three headers present, webhook-timestamp
// within tolerance of now, and one of the space-separated signatures equal
// (constant-time) to the body's. It returns one of the package's errors,
// wrapped. Only then may a receiver act on the body; it de-duplicates on
// webhook-id.
func Verify(secret Secret, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if secret.wh == nil {
		panic("stdwebhook: Verify with a zero Secret")
	}
	id, ts, sig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sig == "" {
		return ErrMissingHeaders
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s off", ErrStale, d.Round(time.Second))
	}
	// The timestamp was checked above against the injected clock; the
	// library's own check reads time.Now with a fixed tolerance.
	if err := secret.wh.VerifyIgnoringTimestamp(body, h); err != nil {
		if errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			return ErrNoMatch
		}
		return fmt.Errorf("%w: %v", ErrNoMatch, err)
	}
	return nil
}
