package sender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// mailbox is an SMTP backend that counts what reaches it.
type mailbox struct {
	user, pass string        // when set, AUTH PLAIN is required
	rejectRcpt bool          // 550 on RCPT TO
	rejectData bool          // 554 after the message data
	stallData  chan struct{} // when set, hold the reply to the data until closed

	mu       sync.Mutex
	dataSeen int        // messages whose data arrived in full
	accepted []envelope // messages answered with 250
}

type envelope struct {
	from string
	to   []string
	data []byte
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{box: b}, nil }

func (b *mailbox) counts() (dataSeen int, accepted []envelope) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dataSeen, slices.Clone(b.accepted)
}

type session struct {
	box    *mailbox
	authed bool
	env    envelope
}

func (s *session) AuthMechanisms() []string {
	if s.box.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.box.user || pass != s.box.pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.box.user != "" && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.env = envelope{from: from}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.box.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	s.env.to = append(s.env.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	s.box.dataSeen++
	s.box.mu.Unlock()
	if s.box.stallData != nil {
		<-s.box.stallData
	}
	if s.box.rejectData {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "content rejected"}
	}
	s.env.data = data
	s.box.mu.Lock()
	s.box.accepted = append(s.box.accepted, s.env)
	s.box.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.env = envelope{} }
func (s *session) Logout() error { return nil }

// testCert returns a server TLS config for 127.0.0.1 and a pool that trusts it.
func testCert(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS() // generates httptest's loopback certificate
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return &tls.Config{Certificates: ts.TLS.Certificates}, pool
}

// startSMTP serves box on a free loopback port in the given TLS mode.
func startSMTP(t *testing.T, box *mailbox, mode string, cfg *tls.Config) int {
	t.Helper()
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	switch mode {
	case "starttls":
		srv.TLSConfig = cfg
	case "tls":
		l = tls.NewListener(l, cfg)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return port
}

func newTestSMTP(t *testing.T, o SMTPOptions, pool *x509.CertPool) *SMTP {
	t.Helper()
	o.Host, o.From = "127.0.0.1", "msgapi <noreply@example.com>"
	s, err := NewSMTP(o)
	if err != nil {
		t.Fatal(err)
	}
	s.tlsConfig.RootCAs = pool
	return s
}

func TestSMTPSend(t *testing.T) {
	serverTLS, pool := testCert(t)
	tests := []struct {
		name         string
		mode         string // client and server TLS mode
		serverMode   string // when the server differs
		box          *mailbox
		user, pass   string
		timeout      time.Duration
		want         Status
		wantErrHas   string
		wantDataSeen int
		wantAccepted int
	}{
		{name: "plain", mode: "none", box: &mailbox{},
			want: Sent, wantDataSeen: 1, wantAccepted: 1},
		{name: "starttls with auth", mode: "starttls", box: &mailbox{user: "u", pass: "p"}, user: "u", pass: "p",
			want: Sent, wantDataSeen: 1, wantAccepted: 1},
		{name: "implicit tls with auth", mode: "tls", box: &mailbox{user: "u", pass: "p"}, user: "u", pass: "p",
			want: Sent, wantDataSeen: 1, wantAccepted: 1},
		{name: "starttls required but not offered", mode: "starttls", serverMode: "none", box: &mailbox{},
			want: Failed, wantErrHas: "STARTTLS"},
		{name: "wrong password", mode: "starttls", box: &mailbox{user: "u", pass: "p"}, user: "u", pass: "x",
			want: Failed, wantErrHas: "535"},
		{name: "recipient rejected", mode: "none", box: &mailbox{rejectRcpt: true},
			want: Failed, wantErrHas: "550"},
		{name: "content rejected", mode: "none", box: &mailbox{rejectData: true},
			want: Failed, wantErrHas: "554", wantDataSeen: 1},
		{name: "no reply to the end of data", mode: "none", box: &mailbox{stallData: make(chan struct{})},
			timeout: 300 * time.Millisecond, want: Unknown, wantDataSeen: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			serverMode := tc.serverMode
			if serverMode == "" {
				serverMode = tc.mode
			}
			port := startSMTP(t, tc.box, serverMode, serverTLS)
			if tc.box.stallData != nil {
				t.Cleanup(func() { close(tc.box.stallData) }) // runs before the server closes
			}
			s := newTestSMTP(t, SMTPOptions{Port: port, TLS: tc.mode, Username: tc.user, Password: tc.pass, Timeout: tc.timeout}, pool)

			got := s.Send(context.Background(), testMessage())

			if got.Status != tc.want || !strings.Contains(got.Error, tc.wantErrHas) {
				t.Errorf("Send = %+v, want status %s and an error containing %q", got, tc.want, tc.wantErrHas)
			}
			dataSeen, accepted := tc.box.counts()
			if dataSeen != tc.wantDataSeen || len(accepted) != tc.wantAccepted {
				t.Errorf("server saw %d messages and accepted %d, want %d and %d", dataSeen, len(accepted), tc.wantDataSeen, tc.wantAccepted)
			}
			if tc.want == Sent && got.ProviderMessageID != "<msg-1@msgapi>" {
				t.Errorf("ProviderMessageID = %q, want <msg-1@msgapi>", got.ProviderMessageID)
			}
		})
	}
}

func TestSMTPMessage(t *testing.T) {
	box := &mailbox{}
	s := newTestSMTP(t, SMTPOptions{Port: startSMTP(t, box, "none", nil), TLS: "none"}, nil)
	m := testMessage()
	if got := s.Send(context.Background(), m); got.Status != Sent {
		t.Fatalf("Send = %+v, want Sent", got)
	}
	_, accepted := box.counts()
	if len(accepted) != 1 {
		t.Fatalf("server accepted %d messages, want 1", len(accepted))
	}
	env := accepted[0]
	if env.from != "noreply@example.com" || len(env.to) != 1 || env.to[0] != "lead@example.com" {
		t.Errorf("envelope = %s -> %v, want noreply@example.com -> [lead@example.com]", env.from, env.to)
	}

	msg, err := netmail.ReadMessage(bytes.NewReader(env.data))
	if err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]string{"From": "noreply@example.com", "To": "lead@example.com"} {
		addr, err := netmail.ParseAddress(msg.Header.Get(h))
		if err != nil || addr.Address != want {
			t.Errorf("%s = %q, want address %s", h, msg.Header.Get(h), want)
		}
	}
	for h, want := range map[string]string{"Subject": "Hi", "Message-Id": "<msg-1@msgapi>"} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if got := msg.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", got)
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	want := "Hello from msgapi\n\nAttachments:\n- a.pdf: https://files.example.com/a.pdf\n- https://files.example.com/b.png\n"
	if got := strings.ReplaceAll(string(text), "\r\n", "\n"); got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}

func TestSMTPClosedPort(t *testing.T) {
	_, port, _ := net.SplitHostPort(closedAddr(t))
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSMTP(t, SMTPOptions{Port: p, TLS: "none", Timeout: time.Second}, nil)
	got := s.Send(context.Background(), testMessage())
	if got.Status != Failed || !strings.Contains(got.Error, "connect") {
		t.Errorf("Send = %+v, want Failed (nothing was transmitted) naming the connection", got)
	}
}

func TestSMTPCancelledContext(t *testing.T) {
	box := &mailbox{stallData: make(chan struct{})}
	port := startSMTP(t, box, "none", nil)
	t.Cleanup(func() { close(box.stallData) })
	s := newTestSMTP(t, SMTPOptions{Port: port, TLS: "none", Timeout: time.Minute}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)

	start := time.Now()
	got := s.Send(ctx, testMessage())
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("Send took %s after cancellation, want it bounded by ctx", elapsed)
	}
	if got.Status != Unknown {
		t.Errorf("Send = %+v, want Unknown (the data reached the server)", got)
	}
}

// Every email carries the RFC 8058 one-click headers when the provider has
// an unsubscribe URL maker; the URL is the recipient's, unfolded intact.
func TestSMTPListUnsubscribe(t *testing.T) {
	box := &mailbox{}
	long := "https://api.example.com/u/" + strings.Repeat("Ab9_-", 30)
	var asked []string
	s := newTestSMTP(t, SMTPOptions{Port: startSMTP(t, box, "none", nil), TLS: "none",
		Unsubscribe: func(m Message) (string, error) { asked = append(asked, m.RecipientEmail); return long, nil }}, nil)
	if got := s.Send(context.Background(), testMessage()); got.Status != Sent {
		t.Fatalf("Send = %+v, want Sent", got)
	}
	_, accepted := box.counts()
	if len(accepted) != 1 {
		t.Fatalf("server accepted %d messages, want 1", len(accepted))
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(accepted[0].data))
	if err != nil {
		t.Fatal(err)
	}
	lu := strings.Join(strings.Fields(msg.Header.Get("List-Unsubscribe")), "")
	if lu != "<"+long+">" {
		t.Errorf("List-Unsubscribe = %q, want <%s>", msg.Header.Get("List-Unsubscribe"), long)
	}
	if got := msg.Header.Get("List-Unsubscribe-Post"); got != "List-Unsubscribe=One-Click" {
		t.Errorf("List-Unsubscribe-Post = %q", got)
	}
	if len(asked) != 1 || asked[0] != "lead@example.com" {
		t.Errorf("unsubscribe URL asked for %v", asked)
	}

	// No maker, no headers; a maker that fails fails the message unsent.
	box2 := &mailbox{}
	s2 := newTestSMTP(t, SMTPOptions{Port: startSMTP(t, box2, "none", nil), TLS: "none",
		Unsubscribe: func(Message) (string, error) { return "", errors.New("no key") }}, nil)
	if got := s2.Send(context.Background(), testMessage()); got.Status != Failed {
		t.Errorf("Send with a failing URL maker = %+v, want Failed", got)
	}
	if _, acc := box2.counts(); len(acc) != 0 {
		t.Errorf("server accepted %d messages, want 0", len(acc))
	}
}
