package notify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (standardwebhooks.com) headers and secrets.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	SecretPrefix    = "whsec_"
	// Tolerance is how far a receiver lets webhook-timestamp be from now.
	Tolerance = 5 * time.Minute
)

// NewSecret returns a whsec_ secret over 32 random bytes.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (crypto/rand docs)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// SecretKey is the HMAC key of a secret: for a whsec_ secret, the
// base64-decoded bytes after the prefix; any other string (a relay secret
// configured as plain text) is its own bytes.
func SecretKey(secret string) ([]byte, error) {
	s, prefixed := strings.CutPrefix(secret, SecretPrefix)
	if s == "" {
		return nil, errors.New("empty webhook secret")
	}
	if !prefixed {
		return []byte(secret), nil
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook secret is not base64 after whsec_")
	}
	return k, nil
}

// Sign returns the webhook-signature value for one delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verification errors.
var (
	ErrNoSignature  = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrStale        = errors.New("webhook: timestamp outside the tolerance")
	ErrBadSignature = errors.New("webhook: no signature matches")
)

// Verify checks a Standard Webhooks request: the timestamp within
// Tolerance of now, and one of the space-separated v1 signatures equal (in
// constant time) to Sign's. What a receiver runs; msgapi runs it on the
// relay's status callbacks.
func Verify(key []byte, id, timestamp, signatures string, body []byte, now time.Time) error {
	if id == "" || timestamp == "" || signatures == "" {
		return ErrNoSignature
	}
	secs, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrNoSignature
	}
	ts := time.Unix(secs, 0)
	if d := now.Sub(ts); d > Tolerance || d < -Tolerance {
		return ErrStale
	}
	want := []byte(Sign(key, id, ts, body))
	ok := false
	for _, s := range strings.Fields(signatures) {
		ok = hmac.Equal([]byte(s), want) || ok
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}
