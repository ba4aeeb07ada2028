// Package sender hands one message to one provider, once, and says what
// happened: the log, webhook, twilio and smtp providers, each a concrete type
// with Send and Name. The caller declares the interface it consumes.
//
// What the package decides is how a provider's answer becomes a Status.
// msgapi never resends a message, so the statuses are about what a human may
// have received: Sent when the provider took the message, Failed only when it
// certainly reached no one (the provider refused it, or it never left this
// process), and Unknown whenever it may have been delivered (timeouts,
// transport errors, 5xx). When in doubt a provider says Unknown, never
// Failed, because a Failed message is one that is safe to send again.
// Providers never retry for the same reason, and every call is bounded by
// the provider's timeout.
package sender

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// EventLogDelivered is logged by the Log provider for every message it records.
const EventLogDelivered = "sender.log_delivered"

const (
	defaultTimeout = 10 * time.Second
	maxReply       = 64 << 10 // bytes of a provider's HTTP reply that are read
	maxSnippet     = 256      // bytes of a reply quoted in Result.Error
	userAgent      = "msgapi"
)

// Attachment is a file the recipient can fetch. Providers pass the URL on;
// none of them downloads it.
type Attachment struct {
	URL         string `json:"url"`
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"contentType,omitempty"`
}

// Message is one outbound message, already validated and normalised.
type Message struct {
	ID, WorkspaceID, Channel       string // channel: "sms" | "imessage" | "email"
	RecipientPhone, RecipientEmail string // already normalised (E.164 / lower-case)
	Body, Subject                  string
	Attachments                    []Attachment
	Metadata                       map[string]any
}

// Status is the outcome of one provider call.
type Status string

const (
	Sent    Status = "sent"
	Failed  Status = "failed"
	Unknown Status = "unknown"
)

// Result is the outcome of one provider call. Failed = the provider
// definitively refused the message (it reached no one). Unknown = timeout,
// transport error or 5xx: it may or may not have been delivered.
type Result struct {
	Status            Status
	ProviderMessageID string
	Error             string
	// Code is a stable machine code for a refusal the caller acts on
	// (CodeOptedOut), empty otherwise.
	Code string
}

// CodeOptedOut: the provider refused because the recipient opted out of
// messages from this sender (Twilio 21610). The caller puts the address on
// its suppression list; the message ends failed.
const CodeOptedOut = "recipient_opted_out"

func failed(format string, args ...any) Result {
	return Result{Status: Failed, Error: fmt.Sprintf(format, args...)}
}

func unknown(format string, args ...any) Result {
	return Result{Status: Unknown, Error: fmt.Sprintf(format, args...)}
}

// timeoutOrDefault checks an options Timeout; setting names the field in errors.
func timeoutOrDefault(setting string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("sender: %s must not be negative, got %s", setting, d)
	case d == 0:
		return defaultTimeout, nil
	}
	return d, nil
}

// checkHTTPURL checks that raw is an absolute http or https URL.
func checkHTTPURL(setting, raw string) error {
	if raw == "" {
		return fmt.Errorf("sender: %s is required", setting)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("sender: %s must be an absolute http(s) URL", setting)
	}
	return nil
}

// newHTTPClient is the client used when the options carry none. It does not
// follow redirects: a relay that answers 3xx has not said it took the message,
// and re-sending the signed body to wherever it points is not our call.
func newHTTPClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// post sends req once and returns the status and at most maxReply bytes of
// the reply. Once a status line has arrived it alone decides the outcome, so
// an error while reading the reply body is not reported.
func post(client *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error repeats the URL, which may carry a token; keep it out of Result.Error.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	return resp.StatusCode, reply, nil
}

// snippet returns the start of a provider reply, fit to quote in an error.
func snippet(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if len(s) <= maxSnippet {
		return s
	}
	cut := maxSnippet
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
