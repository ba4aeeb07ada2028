package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TwilioOptions configure a Twilio provider. One of From and
// MessagingServiceSID is required; MessagingServiceSID wins if both are set.
type TwilioOptions struct {
	AccountSID, AuthToken string
	From                  string // sending number, E.164
	MessagingServiceSID   string
	BaseURL               string        // default "https://api.twilio.com"; tests point it elsewhere
	Timeout               time.Duration // bound on one call; 0 means 10 s
	Client                *http.Client  // optional; the default one does not follow redirects
	// StatusCallback, when set, is the URL Twilio reports delivery
	// receipts to (msgapi's /api/receipts/twilio); each message's own
	// callback carries ?messageId=<msgapi message id>.
	StatusCallback string
}

// Twilio sends SMS through Twilio's Messages REST API. Attachments become
// MediaUrl parameters, which Twilio fetches itself.
type Twilio struct {
	endpoint         string
	sid, token       string
	from, serviceSID string
	statusCallback   string
	timeout          time.Duration
	client           *http.Client
}

// NewTwilio checks o and returns a Twilio provider.
func NewTwilio(o TwilioOptions) (*Twilio, error) {
	switch {
	case o.AccountSID == "":
		return nil, errors.New("sender: TwilioOptions.AccountSID is required")
	case o.AuthToken == "":
		return nil, errors.New("sender: TwilioOptions.AuthToken is required")
	case o.From == "" && o.MessagingServiceSID == "":
		return nil, errors.New("sender: TwilioOptions.From or TwilioOptions.MessagingServiceSID is required")
	}
	if o.BaseURL == "" {
		o.BaseURL = "https://api.twilio.com"
	}
	if err := checkHTTPURL("TwilioOptions.BaseURL", o.BaseURL); err != nil {
		return nil, err
	}
	timeout, err := timeoutOrDefault("TwilioOptions.Timeout", o.Timeout)
	if err != nil {
		return nil, err
	}
	client := o.Client
	if client == nil {
		client = newHTTPClient()
	}
	return &Twilio{
		endpoint: strings.TrimRight(o.BaseURL, "/") + "/2010-04-01/Accounts/" + url.PathEscape(o.AccountSID) + "/Messages.json",
		sid:      o.AccountSID, token: o.AuthToken,
		from: o.From, serviceSID: o.MessagingServiceSID, statusCallback: o.StatusCallback,
		timeout: timeout, client: client,
	}, nil
}

// Name returns "twilio".
func (*Twilio) Name() string { return "twilio" }

// Send creates one Twilio message. 2xx is Sent with Twilio's sid; 4xx is
// Failed with Twilio's error code and message; 5xx, 3xx, a timeout or a
// transport error is Unknown, because Twilio may have queued the message.
func (t *Twilio) Send(ctx context.Context, m Message) Result {
	if m.Channel != "sms" {
		return failed("twilio sends sms only, not %q", m.Channel)
	}
	if m.RecipientPhone == "" {
		return failed("twilio: message has no recipientPhone")
	}
	form := url.Values{"To": {m.RecipientPhone}, "Body": {m.Body}}
	if t.serviceSID != "" {
		form.Set("MessagingServiceSid", t.serviceSID)
	} else {
		form.Set("From", t.from)
	}
	for _, a := range m.Attachments {
		form.Add("MediaUrl", a.URL)
	}
	if t.statusCallback != "" {
		form.Set("StatusCallback", StatusCallbackURL(t.statusCallback, m.ID))
	}

	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return failed("build twilio request: %v", err)
	}
	req.SetBasicAuth(t.sid, t.token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)

	status, reply, err := post(t.client, req)
	switch {
	case err != nil:
		return unknown("post twilio: %v", err)
	case status >= 200 && status < 300:
		var r struct {
			SID string `json:"sid"`
		}
		_ = json.Unmarshal(reply, &r) // accepted is accepted, even without a readable sid
		return Result{Status: Sent, ProviderMessageID: r.SID}
	case status >= 400 && status < 500:
		r := failed("twilio replied %d: %s", status, twilioError(reply))
		if optedOut(reply) {
			r.Code = CodeOptedOut
		}
		return r
	default:
		return unknown("twilio replied %d: %s", status, snippet(reply))
	}
}

// twilioError renders Twilio's JSON error, e.g. {"code":21211,"message":"..."}.
func twilioError(reply []byte) string {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(reply, &e) != nil || (e.Code == 0 && e.Message == "") {
		return snippet(reply)
	}
	return fmt.Sprintf("code %d: %s", e.Code, snippet([]byte(e.Message)))
}

// twilioOptedOut are the Twilio error codes that mean "this recipient
// opted out of your messages": 21610, "Attempt to send to unsubscribed
// recipient" (the recipient replied STOP to this sender or Messaging
// Service; https://www.twilio.com/docs/api/errors/21610). Carrier-side
// blocks that may have other causes (30004 "Message blocked", WhatsApp's
// 63014) arrive as delivery receipts and are not read as an opt-out.
var twilioOptedOut = map[int]bool{21610: true}

func optedOut(reply []byte) bool {
	var e struct {
		Code int `json:"code"`
	}
	return json.Unmarshal(reply, &e) == nil && twilioOptedOut[e.Code]
}

// StatusCallbackURL is the callback URL of one message: base with the
// message id in its query (Twilio signs the whole URL, query included).
func StatusCallbackURL(base, messageID string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "messageId=" + url.QueryEscape(messageID)
}
