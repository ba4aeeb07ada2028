package sender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
)

// SMTPOptions configure an SMTP provider.
type SMTPOptions struct {
	Host string
	// Port defaults by TLS mode: 587 for starttls, 465 for tls, 25 for none.
	Port               int
	Username, Password string // optional, both or neither
	From               string // header and envelope sender; "Name <addr>" is allowed
	// TLS is "starttls" (the default; the server must offer it), "tls"
	// (implicit TLS from the first byte) or "none" (plain text, for a relay
	// on the same host and for tests).
	TLS     string
	Timeout time.Duration // bound on one call, connection included; 0 means 10 s
	// Unsubscribe, when set, returns the HTTPS one-click unsubscribe URL
	// of a message's recipient; every email then carries List-Unsubscribe
	// and List-Unsubscribe-Post: List-Unsubscribe=One-Click (RFC 8058).
	// An error fails the message before anything is sent.
	Unsubscribe func(m Message) (string, error)
}

// SMTP sends email through an SMTP server with go-mail.
//
// Attachments are URLs and are never downloaded: fetching caller-supplied
// URLs from inside our network would be a server-side request forgery hole.
// They are listed as links at the end of the plain-text body instead.
//
// Each email carries Message-ID <ID@msgapi>, derived from the message id, so
// a relay downstream can de-duplicate it.
type SMTP struct {
	host, from         string
	port               int
	username, password string
	mode               string
	tlsConfig          *tls.Config
	timeout            time.Duration
	unsubscribe        func(m Message) (string, error)
}

var smtpPorts = map[string]int{"starttls": 587, "tls": 465, "none": 25}

// NewSMTP checks o and returns an SMTP provider. It does not connect.
func NewSMTP(o SMTPOptions) (*SMTP, error) {
	if o.Host == "" {
		return nil, errors.New("sender: SMTPOptions.Host is required")
	}
	if o.TLS == "" {
		o.TLS = "starttls"
	}
	if _, ok := smtpPorts[o.TLS]; !ok {
		return nil, fmt.Errorf(`sender: SMTPOptions.TLS must be "starttls", "tls" or "none", got %q`, o.TLS)
	}
	if o.Port == 0 {
		o.Port = smtpPorts[o.TLS]
	}
	if o.Port < 1 || o.Port > 65535 {
		return nil, fmt.Errorf("sender: SMTPOptions.Port must be 1-65535, got %d", o.Port)
	}
	if o.From == "" {
		return nil, errors.New("sender: SMTPOptions.From is required")
	}
	if _, err := netmail.ParseAddress(o.From); err != nil {
		return nil, fmt.Errorf("sender: SMTPOptions.From: %w", err)
	}
	if (o.Username == "") != (o.Password == "") {
		return nil, errors.New("sender: SMTPOptions.Username and SMTPOptions.Password must be set together")
	}
	timeout, err := timeoutOrDefault("SMTPOptions.Timeout", o.Timeout)
	if err != nil {
		return nil, err
	}
	return &SMTP{
		host: o.Host, port: o.Port, from: o.From,
		username: o.Username, password: o.Password,
		mode:        o.TLS,
		tlsConfig:   &tls.Config{ServerName: o.Host, MinVersion: tls.VersionTLS12},
		timeout:     timeout,
		unsubscribe: o.Unsubscribe,
	}, nil
}

// Name returns "smtp".
func (*SMTP) Name() string { return "smtp" }

// Send delivers m over one SMTP connection and classifies the outcome.
//
// A server takes responsibility for a message only when it answers 250 to
// the end of DATA, and it must drop a transaction whose connection ends
// before that (RFC 5321 §3.8, §4.1.1.4). Hence:
//
//   - go-mail marked the message delivered: Sent, even if the RSET or QUIT
//     after it failed.
//   - connecting, the greeting, EHLO, STARTTLS or AUTH failed: Failed. These
//     happen in a separate dial step, before MAIL FROM, so nothing was sent.
//   - a *mail.SendError for MAIL FROM, RCPT TO, the DATA command or writing
//     the content: Failed. The end-of-data dot was never written, so the
//     server cannot have accepted the message, whether it replied 4xx or 5xx
//     or the connection broke or timed out. IsTemp only says a retry might
//     work, and we never retry, so it does not change the status.
//   - a *mail.SendError closing DATA (ErrSMTPDataClose): a 4xx/5xx reply
//     (ErrorCode() != 0) is a refusal, so Failed. Anything else — timeout,
//     reset, cancelled — means the dot may have arrived and we missed the
//     answer: Unknown.
//   - anything else: Unknown.
func (s *SMTP) Send(ctx context.Context, m Message) Result {
	if m.ID == "" {
		return failed("smtp: message has no id")
	}
	if m.RecipientEmail == "" {
		return failed("smtp: message has no recipientEmail")
	}
	msg, err := s.compose(m)
	if err != nil {
		return failed("smtp: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel() // also closes the connection, see dialer
	client, err := mail.NewClient(s.host, s.options(ctx)...)
	if err != nil {
		return failed("smtp client: %v", err)
	}
	conn, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return failed("smtp connect: %v", err)
	}
	defer func() { _ = client.CloseWithSMTPClient(conn) }() // QUIT; its outcome changes nothing

	err = client.SendWithSMTPClient(conn, msg)
	var se *mail.SendError
	switch {
	case msg.IsDelivered():
		return Result{Status: Sent, ProviderMessageID: msg.GetMessageID()}
	case err == nil:
		return unknown("smtp: send returned no error but the message is not marked delivered")
	case !errors.As(err, &se):
		return unknown("smtp: %v", err)
	case se.Reason == mail.ErrSMTPDataClose && se.ErrorCode() == 0:
		return unknown("smtp: %v", err)
	default:
		return failed("smtp: %v", err)
	}
}

// options returns the go-mail client options for one call bound by ctx.
func (s *SMTP) options(ctx context.Context) []mail.Option {
	opts := []mail.Option{
		mail.WithPort(s.port),
		mail.WithTimeout(s.timeout),
		mail.WithTLSConfig(s.tlsConfig),
		mail.WithDialContextFunc(s.dialer(ctx)),
		mail.WithoutNoop(), // the connection is fresh
	}
	switch s.mode {
	case "starttls":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "tls":
		// The dialer already speaks TLS; go-mail sees a *tls.Conn and treats
		// the session as encrypted. Opportunistic, because an implicit-TLS
		// server does not offer STARTTLS.
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	}
	if s.username != "" {
		// Auto-discovery never picks PLAIN or LOGIN on an unencrypted session.
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.username), mail.WithPassword(s.password))
	}
	return opts
}

// dialer returns a dial function whose connection is closed when ctx ends.
// go-mail honours a context only while dialling and then relies on per-command
// deadlines that each command extends; closing the socket is what bounds the
// whole call by ctx.
func (s *SMTP) dialer(ctx context.Context) mail.DialContextFunc {
	return func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(dialCtx, network, addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { _ = conn.Close() })
		if s.mode != "tls" {
			return conn, nil
		}
		tc := tls.Client(conn, s.tlsConfig)
		if err := tc.HandshakeContext(dialCtx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// compose builds the email: plain text, attachments as links.
func (s *SMTP) compose(m Message) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if err := msg.To(m.RecipientEmail); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(m.ID + "@msgapi")
	msg.SetDate()
	msg.SetUserAgent(userAgent)
	if s.unsubscribe != nil {
		u, err := s.unsubscribe(m)
		if err != nil {
			return nil, fmt.Errorf("unsubscribe URL: %w", err)
		}
		// RFC 8058 section 3.1: an HTTPS URI in List-Unsubscribe and exactly
		// this List-Unsubscribe-Post; the POST carries nothing else that
		// identifies the recipient, so the URL itself must.
		msg.SetGenHeader(mail.HeaderListUnsubscribe, "<"+u+">")
		msg.SetGenHeader(mail.HeaderListUnsubscribePost, "List-Unsubscribe=One-Click")
	}
	msg.SetBodyString(mail.TypeTextPlain, bodyWithLinks(m))
	return msg, nil
}

func bodyWithLinks(m Message) string {
	if len(m.Attachments) == 0 {
		return m.Body
	}
	var b strings.Builder
	b.WriteString(m.Body)
	b.WriteString("\n\nAttachments:\n")
	for _, a := range m.Attachments {
		if a.Filename != "" {
			fmt.Fprintf(&b, "- %s: %s\n", a.Filename, a.URL)
		} else {
			fmt.Fprintf(&b, "- %s\n", a.URL)
		}
	}
	return b.String()
}
