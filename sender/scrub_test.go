package sender

import (
	"context"
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	m := Message{RecipientPhone: "+14155550100", RecipientEmail: "kate.lead+crm@example.com"}
	tests := []struct {
		name, in, want string
	}{
		{"go-mail affected recipients", "smtp: failed to send mail: 550 5.1.1 no such user, affected recipient(s): kate.lead+crm@example.com",
			"smtp: failed to send mail: 550 5.1.1 no such user, affected recipient(s): <email>"},
		{"own address in other case and brackets", "RCPT <Kate.Lead+CRM@Example.com>: rejected", "RCPT <<email>>: rejected"},
		{"another address", "forwarded to boss@corp.example; loop", "forwarded to <email>; loop"},
		{"twilio E.164", "twilio replied 400: code 21211: The 'To' number +14155550100 is not a valid phone number.",
			"twilio replied 400: code 21211: The 'To' number <phone> is not a valid phone number."},
		{"another E.164 number", "twilio replied 400: code 21610: Attempt to send to unsubscribed recipient +447700900123",
			"twilio replied 400: code 21610: Attempt to send to unsubscribed recipient <phone>"},
		{"own number, national format", "number (415) 555-0100 is unreachable", "number <phone> is unreachable"},
		{"own number, local part only", "line 555-0100 busy", "line <phone> busy"},
		{"bare digits", "to 4155550199 failed", "to <phone> failed"},
		{"next to a status code", "550 5.1.1 4155550199 unknown", "550 5.1.1 <phone> unknown"},
		{"codes and statuses stay", "twilio replied 503: code 20500: retry in 30 s (5.4.1)", "twilio replied 503: code 20500: retry in 30 s (5.4.1)"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Scrub(tt.in, m); got != tt.want {
				t.Errorf("Scrub(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// The premise, with a real SMTP exchange: go-mail's error for a refused
// recipient names the address, and Scrub takes it out.
func TestScrubRealSMTPRefusal(t *testing.T) {
	port := startSMTP(t, &mailbox{rejectRcpt: true}, "none", nil)
	s := newTestSMTP(t, SMTPOptions{Port: port, TLS: "none"}, nil)
	m := testMessage()
	got := s.Send(context.Background(), m)
	if got.Status != Failed || !strings.Contains(got.Error, m.RecipientEmail) {
		t.Fatalf("Send = %+v; want Failed with the recipient in the error (the premise of Scrub)", got)
	}
	if scrubbed := Scrub(got.Error, m); strings.Contains(scrubbed, "@") || !strings.Contains(scrubbed, "550") {
		t.Errorf("Scrub(%q) = %q: want the address gone and the code kept", got.Error, scrubbed)
	}
}
