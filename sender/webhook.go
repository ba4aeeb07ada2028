package sender

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/msgapi/msgapi/stdwebhook"
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	URL string // absolute http(s) URL of the relay
	// Secret signs every call: "whsec_" + base64 of the key (Standard
	// Webhooks), or a legacy secret whose UTF-8 bytes are the key (see
	// stdwebhook.ParseSecret).
	Secret  string
	Timeout time.Duration    // bound on one call; 0 means 10 s
	Client  *http.Client     // optional; the default one does not follow redirects
	Now     func() time.Time // the clock for webhook-timestamp (tests); default time.Now
}

// Webhook POSTs each message as signed JSON to a relay: an iMessage bridge,
// or anything else that speaks HTTP. The call is signed under Standard
// Webhooks (webhook-id, webhook-timestamp, webhook-signature); webhook-id and
// Idempotency-Key are both the message id, so the relay de-duplicates on
// either. With a legacy secret it also carries the deprecated
// X-Msgapi-Signature (see Sign), so relays can move over within a release.
type Webhook struct {
	url     string
	secret  stdwebhook.Secret
	legacy  []byte // the legacy secret's key for X-Msgapi-Signature; nil for whsec_ secrets
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// NewWebhook checks o and returns a Webhook.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if err := checkHTTPURL("WebhookOptions.URL", o.URL); err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.Secret) == "" {
		return nil, errors.New("sender: WebhookOptions.Secret is required")
	}
	secret, err := stdwebhook.ParseSecret(o.Secret)
	if err != nil {
		return nil, fmt.Errorf("sender: WebhookOptions.Secret: %w", err)
	}
	var legacy []byte
	if !strings.HasPrefix(strings.TrimSpace(o.Secret), stdwebhook.Prefix) {
		legacy = []byte(strings.TrimSpace(o.Secret))
	}
	timeout, err := timeoutOrDefault("WebhookOptions.Timeout", o.Timeout)
	if err != nil {
		return nil, err
	}
	client := o.Client
	if client == nil {
		client = newHTTPClient()
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Webhook{url: o.URL, secret: secret, legacy: legacy, timeout: timeout, client: client, now: now}, nil
}

// Name returns "webhook".
func (*Webhook) Name() string { return "webhook" }

// Sign returns the X-Msgapi-Signature value for body: "sha256=" and the hex
// HMAC-SHA256 of the exact body bytes keyed with secret. A receiver recomputes
// it and compares with hmac.Equal.
//
// Deprecated: the scheme has no timestamp, so a captured call can be
// replayed. Relays verify webhook-signature (package stdwebhook) instead;
// X-Msgapi-Signature is sent, with legacy secrets only, for one more release.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// webhookPayload is the relay contract; its keys are exactly these.
type webhookPayload struct {
	MessageID      string         `json:"messageId"`
	WorkspaceID    string         `json:"workspaceId"`
	Channel        string         `json:"channel"`
	RecipientPhone string         `json:"recipientPhone"`
	RecipientEmail string         `json:"recipientEmail"`
	Body           string         `json:"body"`
	Subject        string         `json:"subject"`
	Attachments    []Attachment   `json:"attachments"`
	Metadata       map[string]any `json:"metadata"`
}

// Send POSTs m once. 2xx is Sent (a JSON "id" in the reply becomes the
// ProviderMessageID), 4xx is Failed, and anything else — 5xx, 3xx, a timeout,
// a transport error — is Unknown: the relay may have acted before it failed.
func (w *Webhook) Send(ctx context.Context, m Message) Result {
	// net/http would refuse the header without sending, and that must not read as Unknown.
	if strings.ContainsFunc(m.ID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return failed("webhook: message id %q cannot be an Idempotency-Key", m.ID)
	}
	p := webhookPayload{
		MessageID: m.ID, WorkspaceID: m.WorkspaceID, Channel: m.Channel,
		RecipientPhone: m.RecipientPhone, RecipientEmail: m.RecipientEmail,
		Body: m.Body, Subject: m.Subject, Attachments: m.Attachments, Metadata: m.Metadata,
	}
	// Receivers get [] and {} rather than null.
	if p.Attachments == nil {
		p.Attachments = []Attachment{}
	}
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return failed("encode webhook payload: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return failed("build webhook request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	// A fresh timestamp on every attempt; the id stays the message's.
	stdwebhook.SetHeaders(req.Header, w.secret, m.ID, w.now(), body)
	if w.legacy != nil {
		req.Header.Set("X-Msgapi-Signature", Sign(w.legacy, body))
	}
	req.Header.Set("User-Agent", userAgent)

	status, reply, err := post(w.client, req)
	switch {
	case err != nil:
		return unknown("post webhook: %v", err)
	case status >= 200 && status < 300:
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(reply, &r) // the id is optional
		return Result{Status: Sent, ProviderMessageID: r.ID}
	case status >= 400 && status < 500:
		return failed("webhook replied %d: %s", status, snippet(reply))
	default:
		return unknown("webhook replied %d: %s", status, snippet(reply))
	}
}
