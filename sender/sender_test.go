package sender

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// provider is what the api package consumes; every provider must satisfy it.
type provider interface {
	Send(ctx context.Context, m Message) Result
	Name() string
}

func testMessage() Message {
	return Message{
		ID: "msg-1", WorkspaceID: "ws-1", Channel: "sms",
		RecipientPhone: "+15550100000", RecipientEmail: "lead@example.com",
		Body: "Hello from msgapi", Subject: "Hi",
		Attachments: []Attachment{
			{URL: "https://files.example.com/a.pdf", Filename: "a.pdf", ContentType: "application/pdf"},
			{URL: "https://files.example.com/b.png"},
		},
		Metadata: map[string]any{"crm": "ghl"},
	}
}

func TestNames(t *testing.T) {
	wh, err := NewWebhook(WebhookOptions{URL: "https://relay.example.com/hook", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	tw, err := NewTwilio(TwilioOptions{AccountSID: "AC1", AuthToken: "t", From: "+15550100001"})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := NewSMTP(SMTPOptions{Host: "mail.example.com", From: "noreply@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    provider
		want string
	}{
		{NewLog(zerolog.Nop(), 0), "log"},
		{wh, "webhook"},
		{tw, "twilio"},
		{sm, "smtp"},
	} {
		if got := tc.p.Name(); got != tc.want {
			t.Errorf("Name() = %q, want %q", got, tc.want)
		}
	}
}

func TestConstructorsRejectBadOptions(t *testing.T) {
	webhook := func(o WebhookOptions) error { _, err := NewWebhook(o); return err }
	twilio := func(o TwilioOptions) error { _, err := NewTwilio(o); return err }
	smtp := func(o SMTPOptions) error { _, err := NewSMTP(o); return err }
	okTwilio := TwilioOptions{AccountSID: "AC1", AuthToken: "t", From: "+15550100001"}
	okSMTP := SMTPOptions{Host: "mail.example.com", From: "noreply@example.com"}
	with := func(o TwilioOptions, f func(*TwilioOptions)) TwilioOptions { f(&o); return o }
	withSMTP := func(o SMTPOptions, f func(*SMTPOptions)) SMTPOptions { f(&o); return o }

	tests := []struct {
		name    string
		err     error
		wantErr string // substring naming the setting; "" means no error
	}{
		{"webhook ok", webhook(WebhookOptions{URL: "https://r.example.com", Secret: "s"}), ""},
		{"webhook no url", webhook(WebhookOptions{Secret: "s"}), "WebhookOptions.URL"},
		{"webhook relative url", webhook(WebhookOptions{URL: "/hook", Secret: "s"}), "WebhookOptions.URL"},
		{"webhook ftp url", webhook(WebhookOptions{URL: "ftp://r.example.com", Secret: "s"}), "WebhookOptions.URL"},
		{"webhook no secret", webhook(WebhookOptions{URL: "https://r.example.com"}), "WebhookOptions.Secret"},
		{"webhook negative timeout", webhook(WebhookOptions{URL: "https://r.example.com", Secret: "s", Timeout: -time.Second}), "WebhookOptions.Timeout"},

		{"twilio ok", twilio(okTwilio), ""},
		{"twilio service sid only", twilio(with(okTwilio, func(o *TwilioOptions) { o.From = ""; o.MessagingServiceSID = "MG1" })), ""},
		{"twilio no sid", twilio(with(okTwilio, func(o *TwilioOptions) { o.AccountSID = "" })), "TwilioOptions.AccountSID"},
		{"twilio no token", twilio(with(okTwilio, func(o *TwilioOptions) { o.AuthToken = "" })), "TwilioOptions.AuthToken"},
		{"twilio no sender", twilio(with(okTwilio, func(o *TwilioOptions) { o.From = "" })), "TwilioOptions.From"},
		{"twilio bad base url", twilio(with(okTwilio, func(o *TwilioOptions) { o.BaseURL = "api.twilio.com" })), "TwilioOptions.BaseURL"},

		{"smtp ok", smtp(okSMTP), ""},
		{"smtp no host", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.Host = "" })), "SMTPOptions.Host"},
		{"smtp no from", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.From = "" })), "SMTPOptions.From"},
		{"smtp bad from", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.From = "not an address" })), "SMTPOptions.From"},
		{"smtp bad tls", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.TLS = "ssl" })), "SMTPOptions.TLS"},
		{"smtp bad port", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.Port = 70000 })), "SMTPOptions.Port"},
		{"smtp user without password", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.Username = "u" })), "SMTPOptions.Password"},
		{"smtp negative timeout", smtp(withSMTP(okSMTP, func(o *SMTPOptions) { o.Timeout = -1 })), "SMTPOptions.Timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.wantErr == "" && tc.err != nil:
				t.Errorf("got error %v, want none", tc.err)
			case tc.wantErr != "" && tc.err == nil:
				t.Errorf("got no error, want one naming %s", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(tc.err.Error(), tc.wantErr):
				t.Errorf("got error %q, want it to name %s", tc.err, tc.wantErr)
			}
		})
	}
}

func TestSMTPDefaultPorts(t *testing.T) {
	for tlsMode, want := range map[string]int{"": 587, "starttls": 587, "tls": 465, "none": 25} {
		s, err := NewSMTP(SMTPOptions{Host: "mail.example.com", From: "noreply@example.com", TLS: tlsMode})
		if err != nil {
			t.Fatal(err)
		}
		if s.port != want {
			t.Errorf("TLS %q: got port %d, want %d", tlsMode, s.port, want)
		}
	}
}

func TestSign(t *testing.T) {
	// RFC 4231, test case 2.
	got := Sign([]byte("Jefe"), []byte("what do ya want for nothing?"))
	want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2 bytes each
	tests := []struct {
		in   string
		want string
	}{
		{"  short reply \n", "short reply"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{long, strings.Repeat("é", maxSnippet/2) + "…"},
	}
	for _, tc := range tests {
		if got := snippet([]byte(tc.in)); got != tc.want {
			t.Errorf("snippet(%.20q) = %.40q, want %.40q", tc.in, got, tc.want)
		}
	}
}
