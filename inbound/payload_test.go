package inbound

import (
	"testing"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
)

const form = "application/x-www-form-urlencoded"

func TestParse(t *testing.T) {
	tests := []struct {
		name, ch, ct, body string
		wantKey            string
		wantPhone          string
		wantEmail          string
		wantMedium         string
		wantCode           msgapi.Code // "" = accepted
	}{
		{name: "slack event_id", ch: ChannelSlack, body: `{"type":"event_callback","team_id":"T1","event_id":"Ev08MFMKH6","event":{"type":"message","user":"U2147483697","channel":"C2147483705","text":"hi","ts":"1355517523.000005","event_ts":"1355517523.000005"}}`,
			wantKey: "Ev08MFMKH6", wantEmail: "slack.t1.u2147483697@slack.invalid", wantMedium: "slack"},
		{name: "slack falls back to event_ts", ch: ChannelSlack, body: `{"type":"event_callback","team_id":"T1","event":{"type":"message","user":"U1","channel":"C9","ts":"1.2","event_ts":"1355517523.000005"}}`,
			wantKey: "ts:C9:1355517523.000005", wantEmail: "slack.t1.u1@slack.invalid", wantMedium: "slack"},
		{name: "slack without any id", ch: ChannelSlack, body: `{"type":"event_callback","event":{"type":"message","user":"U1","text":"x"}}`, wantCode: msgapi.CodeInvalid},
		{name: "slack unknown type", ch: ChannelSlack, body: `{"type":"block_actions"}`, wantCode: msgapi.CodeInvalid},
		{name: "slack not JSON", ch: ChannelSlack, body: `payload=x`, wantCode: msgapi.CodeInvalid},
		{name: "twilio sms", ch: ChannelTwilio, ct: form, body: "MessageSid=SM1&AccountSid=AC1&From=%2B14155550100&To=%2B15005550006&Body=Hi&NumMedia=0",
			wantKey: "SM1", wantPhone: "+14155550100", wantMedium: "sms"},
		{name: "twilio whatsapp", ch: ChannelTwilio, ct: form, body: "MessageSid=SM2&From=whatsapp%3A%2B14155550100&To=whatsapp%3A%2B15005550006&Body=Hi",
			wantKey: "SM2", wantPhone: "+14155550100", wantMedium: "whatsapp"},
		{name: "twilio alphanumeric sender", ch: ChannelTwilio, ct: form, body: "MessageSid=SM3&From=ACME&Body=Hi",
			wantKey: "SM3", wantEmail: "twilio.acme@twilio.invalid", wantMedium: "sms"},
		{name: "twilio without MessageSid", ch: ChannelTwilio, ct: form, body: "SmsSid=SM4&From=%2B14155550100&Body=Hi", wantCode: msgapi.CodeInvalid},
		{name: "twilio as JSON", ch: ChannelTwilio, ct: "application/json", body: `{"MessageSid":"SM5"}`, wantCode: msgapi.CodeUnsupportedMedia},
		{name: "telegram message", ch: ChannelTelegram, body: `{"update_id":10000,"message":{"message_id":1365,"from":{"id":1111111,"is_bot":false,"first_name":"Ada"},"chat":{"id":1111111,"type":"private"},"date":1441645532,"text":"/start"}}`,
			wantKey: "10000", wantEmail: "telegram.1111111@telegram.invalid", wantMedium: "telegram"},
		{name: "telegram update_id 0", ch: ChannelTelegram, body: `{"update_id":0,"message":{"message_id":1,"from":{"id":5},"chat":{"id":-100200},"text":"x"}}`,
			wantKey: "0", wantEmail: "telegram.5@telegram.invalid", wantMedium: "telegram"},
		{name: "telegram own contact card", ch: ChannelTelegram, body: `{"update_id":7,"message":{"message_id":2,"from":{"id":5},"chat":{"id":5},"contact":{"phone_number":"14155550100","user_id":5}}}`,
			wantKey: "7", wantPhone: "+14155550100", wantMedium: "telegram"},
		{name: "telegram someone else's contact card", ch: ChannelTelegram, body: `{"update_id":8,"message":{"message_id":3,"from":{"id":5},"chat":{"id":5},"contact":{"phone_number":"14155550100","user_id":6}}}`,
			wantKey: "8", wantEmail: "telegram.5@telegram.invalid", wantMedium: "telegram"},
		{name: "telegram without update_id", ch: ChannelTelegram, body: `{"message":{"message_id":1,"chat":{"id":5}}}`, wantCode: msgapi.CodeInvalid},
		{name: "email", ch: ChannelEmail, body: `{"headers":{"message-id":" <CAF=abc@mail.example.com> "},"from":"Ada Lovelace <Ada@Example.com>","to":["support@acme.example"],"subject":"Invoice","text":"see attached","attachments":[{"filename":"a.pdf","contentType":"application/pdf","content":"JVBERi0x\nLjQ="}]}`,
			wantKey: "CAF=abc@mail.example.com", wantEmail: "ada@example.com", wantMedium: "email"},
		{name: "email without Message-ID", ch: ChannelEmail, body: `{"headers":{},"from":"a@example.com","text":"x"}`, wantCode: msgapi.CodeInvalid},
		{name: "email with a bad From", ch: ChannelEmail, body: `{"headers":{"Message-ID":"<1@x>"},"from":"not an address"}`, wantCode: msgapi.CodeInvalid},
		{name: "email with bad base64", ch: ChannelEmail, body: `{"headers":{"Message-ID":"<1@x>"},"from":"a@example.com","attachments":[{"content":"%%%"}]}`, wantCode: msgapi.CodeInvalid},
		{name: "email key with a control character", ch: ChannelEmail, body: `{"headers":{"Message-ID":"<1\u0000@x>"},"from":"a@example.com"}`, wantCode: msgapi.CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := tt.ct
			if ct == "" {
				ct = "application/json"
			}
			ev, err := parse(tt.ch, ct, []byte(tt.body))
			if tt.wantCode != "" {
				if got := msgapi.ErrorCode(err); got != tt.wantCode {
					t.Fatalf("parse error code = %q (%v), want %q", got, err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if ev.key != tt.wantKey || ev.phone != tt.wantPhone || ev.email != tt.wantEmail || ev.medium != tt.wantMedium {
				t.Errorf("got key %q phone %q email %q medium %q, want %q %q %q %q",
					ev.key, ev.phone, ev.email, ev.medium, tt.wantKey, tt.wantPhone, tt.wantEmail, tt.wantMedium)
			}
		})
	}
}

func TestParseNotices(t *testing.T) {
	ev, err := parse(ChannelSlack, "application/json", []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`))
	if err != nil || ev.challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("url_verification: challenge %q, err %v", ev.challenge, err)
	}
	for _, tc := range []struct{ ch, body string }{
		{ChannelSlack, `{"type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820}`},
		{ChannelTelegram, `{"update_id":5,"callback_query":{"id":"1","from":{"id":5}}}`},
		{ChannelTwilio, "MessageSid=SM1&MessageStatus=delivered&SmsStatus=delivered&From=%2B15005550006&To=%2B14155550100"},
	} {
		ct := "application/json"
		if tc.ch == ChannelTwilio {
			ct = form
		}
		ev, err := parse(tc.ch, ct, []byte(tc.body))
		if err != nil || !ev.notice {
			t.Errorf("%s %s: notice %v, err %v; want a notice", tc.ch, tc.body, ev.notice, err)
		}
	}
}

func TestEmailAttachmentBytes(t *testing.T) {
	ev, err := parse(ChannelEmail, "application/json", []byte(`{"headers":{"Message-ID":"<1@x>"},"from":"a@example.com","attachments":[{"filename":"a.txt","content":"aGVs\r\nbG8="}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.files) != 1 || string(ev.files[0].data) != "hello" {
		t.Errorf("files = %+v, want one file holding %q", ev.files, "hello")
	}
}

func TestPlatformAddressIsALeadAddress(t *testing.T) {
	for _, ids := range [][]string{{"T1", "U1"}, {"-1001234567890"}, {"ACME Co."}, {"é"}, {string(make([]byte, 100))}, {""}} {
		a := platformAddress("slack", ids...)
		if got, err := contact.NormalizeEmail(a); err != nil || got != a {
			t.Errorf("platformAddress(%q) = %q: NormalizeEmail = %q, %v", ids, a, got, err)
		}
	}
	for _, pair := range [][2]string{{"U1", "U2"}, {"UK1", "U\u212A1"}} { // Kelvin sign lower-cases to "k"
		if platformAddress("slack", "T1", pair[0]) == platformAddress("slack", "T1", pair[1]) {
			t.Errorf("users %q and %q share an address", pair[0], pair[1])
		}
	}
}

// FuzzParse: no payload panics the parser, and an accepted one always has a
// storable key and exactly one valid lead address.
func FuzzParse(f *testing.F) {
	f.Add(ChannelSlack, `{"type":"event_callback","event_id":"Ev1","event":{"user":"U1","event_ts":"1.2"}}`)
	f.Add(ChannelTwilio, "MessageSid=SM1&From=%2B14155550100")
	f.Add(ChannelTelegram, `{"update_id":1,"message":{"message_id":1,"from":{"id":1},"chat":{"id":1}}}`)
	f.Add(ChannelEmail, `{"headers":{"Message-ID":"<a@b>"},"from":"a@example.com"}`)
	f.Fuzz(func(t *testing.T, ch, body string) {
		ct := "application/json"
		if ch == ChannelTwilio {
			ct = form
		}
		ev, err := parse(ch, ct, []byte(body))
		if err != nil || ev.challenge != "" || ev.notice || !knownChannel(ch) {
			return
		}
		if err := checkKey(ev.key); err != nil {
			t.Fatalf("accepted key %q: %v", ev.key, err)
		}
		if (ev.phone == "") == (ev.email == "") {
			t.Fatalf("phone %q, email %q: want exactly one", ev.phone, ev.email)
		}
		if ev.email != "" {
			if got, err := contact.NormalizeEmail(ev.email); err != nil || got != ev.email {
				t.Fatalf("lead address %q does not normalise to itself: %q %v", ev.email, got, err)
			}
		}
	})
}
