// Package inbound receives vendor webhooks (Slack, Twilio, Telegram and a
// signed email relay) and records each logical event exactly once, as one
// inbound message in its lead's conversation.
//
// Vendors deliver the same event more than once, so what it decides is
// "have we recorded this event?", keyed on the vendor's own id (never on
// anything the receiver makes up), and it decides it in MongoDB:
//
//   - Every artefact of an event has an _id derived from (workspace, channel,
//     vendor key): the inbound message, the completion record, the owner of
//     each attachment. Concurrent deliveries race on unique inserts of those
//     _ids, where exactly one insert wins; no conditional update decides
//     anything (they are not atomic on the embedded engine).
//   - The completion record (inbound_events) is written last. A delivery that
//     finds it answers 200 at once and writes nothing; one that does not
//     re-runs every step, each of which finds its artefact if it exists, so a
//     crash half-way is repaired by the vendor's retry without a duplicate.
//   - Redis, when configured, is a pure fast path: its key is set only after
//     the completion record exists, so a Redis hit always means "completed"
//     and a Redis miss, error or restart only costs a MongoDB read. It can
//     skip work but never lose or duplicate an event.
//   - Attachment bytes are hashed; the first message of a workspace to carry
//     a given SHA-256 owns it, and later messages with the same bytes point at
//     that message instead of being processed again.
//
// The webhook answers only after the event is durably recorded (a handful of
// single-document writes), well inside Slack's 3 s.
package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/vendorsig"
	"github.com/msgapi/msgapi/workspace"
)

// The webhook channels, one per vendor. They are the {channel} of the route
// and the keys of a workspace's Secrets.
const (
	ChannelSlack    = "slack"
	ChannelTwilio   = "twilio"
	ChannelTelegram = "telegram"
	ChannelEmail    = "email"
)

const (
	// MaxBody bounds a webhook body (SPEC: 1 MiB).
	MaxBody = 1 << 20
	// KeyTTL is how long a dedup key lives: the longest vendor retry window.
	KeyTTL = 24 * time.Hour
	// redisTimeout bounds every fast-path call, so an unreachable Redis
	// costs a delivery at most this much.
	redisTimeout = 250 * time.Millisecond
)

// Collections used by this package. inbound_events holds the completion
// records (24 h); inbound_attachments the first owner of each attachment
// hash, kept for good: content dedup has no window.
var Collections = []store.Collection{
	{Name: collEvents, ExpiresField: "expiresAt"},
	{Name: collAttachments},
}

const (
	collEvents      = "inbound_events"
	collAttachments = "inbound_attachments"
)

// Options are the Handler's dependencies.
type Options struct {
	Store      *store.Store
	Workspaces *workspace.Store
	Messages   *messages.Store
	// Redis enables the fast path; nil leaves MongoDB alone (still correct).
	Redis *redis.Client
	// PublicBaseURL ("https://api.example.com") is the origin Twilio calls,
	// for its signature; when set it always wins. Empty: derived from the
	// request, honouring X-Forwarded-Proto and X-Forwarded-Host only from a
	// peer in TrustedProxies.
	PublicBaseURL string
	// TrustedProxies are the networks whose X-Forwarded-Proto/Host are
	// believed. Anyone else's are ignored: a client must not choose the URL
	// its signature is checked against.
	TrustedProxies []netip.Prefix
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// OnMessage, optional, records the message.received event
	// (notify.Outbox.RecordMessage). It runs after the message insert and
	// before the completion record, for a new and a redelivered event
	// alike, so a crash between the two is repaired by the vendor's retry;
	// it must be idempotent.
	OnMessage func(ctx context.Context, m messages.Message) error
	// OnReply, optional, sees every inbound text a person sent from a
	// phone (Twilio SMS and WhatsApp): the consent keywords (STOP, START).
	// Like OnMessage it runs before the completion record, for a new and
	// a redelivered event alike, and must be idempotent; an error fails
	// the delivery, so the vendor's retry runs it again.
	OnReply func(ctx context.Context, r Reply) error
}

// Reply is an inbound text from a person's phone, for OnReply.
type Reply struct {
	WorkspaceID string
	MessageID   string // the inbound message (derived from the vendor's key)
	Channel     string // the medium: sms, whatsapp
	Phone       string // E.164
	Text        string
}

// Handler serves POST /api/webhooks/{workspaceId}/{channel}.
type Handler struct {
	events, atts *mongo.Collection
	workspaces   *workspace.Store
	msgs         *messages.Store
	redis        *redis.Client
	publicBase   string
	proxies      []netip.Prefix
	now          func() time.Time
	onMessage    func(ctx context.Context, m messages.Message) error
	onReply      func(ctx context.Context, r Reply) error

	// afterMessage, when set (tests), runs after the inbound message is
	// written and before completion is recorded: a failure there is a crash.
	afterMessage func() error
}

// New returns a Handler.
func New(opts Options) *Handler {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Handler{
		events:     opts.Store.Collection(collEvents),
		atts:       opts.Store.Collection(collAttachments),
		workspaces: opts.Workspaces,
		msgs:       opts.Messages,
		redis:      opts.Redis,
		publicBase: strings.TrimRight(opts.PublicBaseURL, "/"),
		proxies:    opts.TrustedProxies,
		now:        now,
		onMessage:  opts.OnMessage,
		onReply:    opts.OnReply,
	}
}

// NewRedis returns a client for the fast path from a redis:// URL, with
// short timeouts and no retries: a slow or absent Redis must cost a
// delivery little, because MongoDB decides anyway.
func NewRedis(rawURL string) (*redis.Client, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	opt.DialTimeout = redisTimeout
	opt.ReadTimeout = redisTimeout
	opt.WriteTimeout = redisTimeout
	opt.PoolTimeout = redisTimeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClient(opt), nil
}

// errSignature is the one answer to every signature failure, whatever the
// reason (logged, not shown): a prober learns nothing about workspaces or
// which secrets are set.
var errSignature = msgapi.Errorf(msgapi.CodeUnauthorized, "the webhook signature is missing or invalid")

// errNoEndpoint answers a workspace id that cannot exist.
var errNoEndpoint = msgapi.Errorf(msgapi.CodeNotFound, "no webhook endpoint here: the path is /api/webhooks/{workspaceId}/{channel} with a workspace id ws_…")

// ack is the JSON answer to an accepted delivery, new or duplicate.
type ack struct {
	Success   bool   `json:"success"`
	Duplicate bool   `json:"duplicate"`
	MessageID string `json:"messageId"`
}

// twiml is Twilio's answer: an empty TwiML document (reply with nothing).
const twiml = `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`

// Receive is POST /api/webhooks/{workspaceId}/{channel}, mounted in
// api/routes.go outside the API-key group: vendors authenticate by
// signature, with the workspace's channel secret.
func (h *Handler) Receive(c echo.Context) error {
	// Both path segments are checked before anything logs or looks them up:
	// they are whatever the caller sent, of any length. Their shape is
	// public, so a 404 for a malformed one tells a prober nothing.
	wsID, ch := c.Param("workspaceId"), c.Param("channel")
	if !msgapi.ValidID("ws", wsID) {
		return errNoEndpoint
	}
	if !knownChannel(ch) {
		return msgapi.Errorf(msgapi.CodeNotFound, "unknown webhook channel (slack, twilio, telegram, email)")
	}
	r := c.Request()
	log := zerolog.Ctx(r.Context()).With().Str("workspaceId", wsID).Str("channel", ch).Logger()
	ctx := log.WithContext(r.Context())

	// What can be judged without the body is judged first: an unknown
	// workspace, a channel without a secret, missing or malformed signature
	// headers, a stale timestamp and a wrong Telegram token cost no body
	// read (up to MaxBody) and no MAC over it.
	secret, known, err := h.secret(ctx, wsID, ch)
	if err != nil {
		return err
	}
	reason := h.precheck(ch, secret, r)
	if !known {
		reason = reasonUnknownWorkspace
	}
	var body []byte
	if reason == "" {
		if body, err = readBody(c); err != nil {
			return err
		}
		reason = h.verify(ch, secret, r, body)
	}
	if reason != "" {
		log.Warn().Str("event", events.InboundSignatureInvalid).Str("reason", reason).Msg("inbound webhook refused: bad signature")
		return errSignature
	}

	ev, err := parse(ch, r.Header.Get(echo.HeaderContentType), body)
	if err != nil {
		return err
	}
	switch {
	case ev.challenge != "":
		return c.JSON(http.StatusOK, map[string]string{"challenge": ev.challenge})
	case ev.notice:
		return c.NoContent(http.StatusOK)
	}

	res, err := h.record(ctx, wsID, ev)
	if err != nil {
		return err
	}
	if ch == ChannelTwilio {
		return c.Blob(http.StatusOK, "text/xml; charset=utf-8", []byte(twiml))
	}
	return c.JSON(http.StatusOK, ack{Success: true, Duplicate: res.duplicate, MessageID: res.messageID})
}

func knownChannel(ch string) bool {
	switch ch {
	case ChannelSlack, ChannelTwilio, ChannelTelegram, ChannelEmail:
		return true
	}
	return false
}

// secret returns the workspace's secret for the channel ("" when none is
// set) and whether the workspace exists and is enabled. Both gaps end in
// the same 401. Unknown workspace ids are remembered (workspace.Find), so a
// flood of made-up ids costs the store one read per distinct id.
func (h *Handler) secret(ctx context.Context, wsID, ch string) (string, bool, error) {
	ws, err := h.workspaces.Find(ctx, wsID)
	if msgapi.ErrorCode(err) == msgapi.CodeNotFound || ws.Disabled {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	secret, err := h.workspaces.Secret(ws, ch)
	return secret, true, err
}

// readBody reads at most MaxBody bytes; more is 413.
func readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > MaxBody {
		return nil, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 1 MiB")
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 1 MiB")
		}
		return nil, msgapi.Errorf(msgapi.CodeInvalid, "the request body could not be read")
	}
	return b, nil
}

// requestURL is the URL the vendor called: PublicBaseURL when set, else the
// scheme and host the client saw (X-Forwarded-Proto / X-Forwarded-Host from
// a trusted proxy, else the connection's), plus the request URI as sent.
func (h *Handler) requestURL(r *http.Request) string {
	return vendorsig.RequestURL(r, h.publicBase, h.proxies)
}
