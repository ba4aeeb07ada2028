package sender

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTwilio checks each request against what Twilio's Messages API expects
// and answers with a canned status and Twilio-shaped JSON.
func fakeTwilio(t *testing.T, status int, reply string, wantSender [2]string) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/2010-04-01/Accounts/AC123/Messages.json" {
			t.Errorf("got %s %s, want POST /2010-04-01/Accounts/AC123/Messages.json", r.Method, r.URL.Path)
		}
		if user, pass, ok := r.BasicAuth(); !ok || user != "AC123" || pass != "tok" {
			t.Errorf("basic auth = %q, %q, %v; want AC123, tok", user, pass, ok)
		}
		if got := r.Header.Get("Content-Type"); got != "application/x-www-form-urlencoded" {
			t.Errorf("Content-Type = %q", got)
		}
		if err := r.ParseForm(); err != nil {
			t.Errorf("parse form: %v", err)
		}
		want := map[string][]string{
			"To":          {"+15550100000"},
			"Body":        {"Hello from msgapi"},
			"MediaUrl":    {"https://files.example.com/a.pdf", "https://files.example.com/b.png"},
			wantSender[0]: {wantSender[1]},
		}
		if len(r.PostForm) != len(want) {
			t.Errorf("form has %d fields, want %d: %v", len(r.PostForm), len(want), r.PostForm)
		}
		for k, v := range want {
			if got := r.PostForm[k]; !slices.Equal(got, v) {
				t.Errorf("form %s = %q, want %q", k, got, v)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestTwilioSend(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		reply      string
		service    bool
		want       Status
		wantID     string
		wantErrHas []string
		wantCode   string
	}{
		{name: "queued", status: 201, reply: `{"sid":"SM0123456789abcdef0123456789abcdef","status":"queued"}`,
			want: Sent, wantID: "SM0123456789abcdef0123456789abcdef"},
		{name: "queued via messaging service", status: 201, reply: `{"sid":"SM1","status":"accepted"}`, service: true,
			want: Sent, wantID: "SM1"},
		{name: "invalid number", status: 400, reply: `{"code":21211,"message":"The 'To' number is not a valid phone number.","more_info":"https://www.twilio.com/docs/errors/21211","status":400}`,
			want: Failed, wantErrHas: []string{"400", "21211", "The 'To' number is not a valid phone number."}},
		{name: "opted out", status: 400, reply: `{"code":21610,"message":"Attempt to send to unsubscribed recipient","more_info":"https://www.twilio.com/docs/errors/21610","status":400}`,
			want: Failed, wantErrHas: []string{"400", "21610"}, wantCode: CodeOptedOut},
		{name: "server error", status: 500, reply: `{"code":20500,"message":"Internal Server Error","status":500}`,
			want: Unknown, wantErrHas: []string{"500"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := TwilioOptions{AccountSID: "AC123", AuthToken: "tok", From: "+15550100001"}
			wantSender := [2]string{"From", "+15550100001"}
			if tc.service {
				o.MessagingServiceSID = "MG123" // wins over From
				wantSender = [2]string{"MessagingServiceSid", "MG123"}
			}
			srv, calls := fakeTwilio(t, tc.status, tc.reply, wantSender)
			o.BaseURL = srv.URL
			tw, err := NewTwilio(o)
			if err != nil {
				t.Fatal(err)
			}

			got := tw.Send(context.Background(), testMessage())

			if got.Status != tc.want || got.ProviderMessageID != tc.wantID {
				t.Errorf("Send = %+v, want status %s, provider id %q", got, tc.want, tc.wantID)
			}
			if got.Code != tc.wantCode {
				t.Errorf("Code = %q, want %q", got.Code, tc.wantCode)
			}
			for _, s := range tc.wantErrHas {
				if !strings.Contains(got.Error, s) {
					t.Errorf("Error = %q, want it to contain %q", got.Error, s)
				}
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("Twilio saw %d requests, want exactly 1", n)
			}
		})
	}
}

func TestTwilioRefusesOtherChannels(t *testing.T) {
	srv, calls := fakeTwilio(t, 201, `{"sid":"SM1"}`, [2]string{"From", "+15550100001"})
	tw, err := NewTwilio(TwilioOptions{AccountSID: "AC123", AuthToken: "tok", From: "+15550100001", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, channel := range []string{"imessage", "email"} {
		m := testMessage()
		m.Channel = channel
		got := tw.Send(context.Background(), m)
		if got.Status != Failed || !strings.Contains(got.Error, channel) {
			t.Errorf("channel %s: Send = %+v, want Failed naming the channel", channel, got)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("Twilio saw %d requests, want 0", n)
	}
}

func TestTwilioTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the request context ends on disconnect only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	tw, err := NewTwilio(TwilioOptions{AccountSID: "AC123", AuthToken: "tok", From: "+15550100001",
		BaseURL: srv.URL, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := tw.Send(context.Background(), testMessage())
	if got.Status != Unknown || got.Error == "" {
		t.Errorf("Send = %+v, want Unknown with an error", got)
	}
}
