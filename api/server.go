// Package api is msgapi's HTTP surface. It authenticates, reads and limits
// bodies, runs the Idempotency-Key layer and hands a send to package send,
// which validates, asks the duplicate guard, writes the domain records and
// calls the channel's sender. Every error becomes an RFC 9457 problem
// document in one place (errors.go).
package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/hubspot"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/workspace"
)

// Options are the Server's dependencies.
type Options struct {
	Log        zerolog.Logger
	Store      *store.Store
	Workspaces *workspace.Store
	// AdminToken enables /admin/* when non-empty (Bearer AdminToken).
	AdminToken string
	// Send is the send path (POST /api/messages, DELETE /api/dedup-locks).
	Send SendPath
	// Messages is read by the GET routes (read.go).
	Messages *messages.Store
	// Idempotency guards POST /api/messages; nil disables the header.
	Idempotency *idempotency.Keys
	// Outbox enables the event webhook routes; nil leaves them out.
	Outbox *notify.Outbox
	// Consent enables the suppression-list routes; with Unsubscribe (the
	// token sealer) also the public one-click unsubscribe page.
	Consent     *consent.Store
	Unsubscribe *consent.Tokens
	// Inbound receives vendor webhooks (inbound.Handler.Receive); nil
	// leaves the route out.
	Inbound echo.HandlerFunc
	// TwilioReceipt and RelayReceipt receive delivery receipts
	// (receipts.Handler); nil leaves the route out.
	TwilioReceipt, RelayReceipt echo.HandlerFunc
	// Metrics serves GET /metrics (metrics.Metrics.Handler); nil leaves the
	// route out.
	Metrics http.Handler
	// Middleware runs first on every request (e.g. metrics).
	Middleware []echo.MiddlewareFunc
	// Limiter limits POST /api/messages per workspace (nil: no limit) to
	// the workspace's own limit, else RateLimit (the zero Limit: none).
	Limiter   RateLimiter
	RateLimit ratelimit.Limit
	// OnRateLimited, optional, observes each 429 by route template and
	// workspace id.
	OnRateLimited func(route, workspaceID string)
	// PublicURL, optional, is the server's public origin
	// (MSGAPI_PUBLIC_URL): problem types are absolute URLs under it, as
	// RFC 9457 recommends; without it they are relative ("/docs#error-…").
	PublicURL string
	// TrustedProxies are the networks whose X-Forwarded-Proto/Host name the
	// URL a vendor signed (the HubSpot action's signature covers it).
	TrustedProxies []netip.Prefix
	// HubSpot completes the HubSpot action's BLOCKed executions (package
	// hubspot); the action's route is mounted when it is set.
	HubSpot *hubspot.Callbacks
	// Now is the clock of signature timestamps (tests); nil is time.Now.
	Now func() time.Time
}

// APIVersion is the version of the HTTP API, in the Msgapi-Version
// header of every answer. Within one version, members, headers, codes and
// statuses are only ever added (an opt-in such as an answer profile may
// choose new statuses), never removed or changed in meaning; a change that
// would break a caller is a new version (README: Compatibility).
const APIVersion = "1"

// HeaderVersion names the API version on every answer.
const HeaderVersion = "Msgapi-Version"

// SendPath is the send path: package send's Service. It is an interface so
// that api depends on none of the send path's internals (go list -deps
// ./api has no guard).
type SendPath interface {
	// Send validates body and sends it once; commitID is the message id
	// an Idempotency-Key claim names ("" without one).
	Send(ctx context.Context, ws workspace.Workspace, body []byte, commitID string) (msgapi.Answer, error)
	// DeleteLock frees a dedup lock of the workspace.
	DeleteLock(ctx context.Context, workspaceID, lockID string) error
	// DefaultRegion is the region of phone numbers without a country code.
	DefaultRegion() string
	// Cancel cancels a scheduled message of the workspace; CancelByKey
	// every scheduled message given one cancellation key.
	Cancel(ctx context.Context, ws workspace.Workspace, id string) (messages.Message, error)
	CancelByKey(ctx context.Context, ws workspace.Workspace, key string) (canceled, notCanceled []messages.Message, err error)
}

// Server holds the handlers' dependencies.
type Server struct {
	opts Options
	log  zerolog.Logger
	echo *echo.Echo
}

// New returns the HTTP handler with every route mounted.
func New(opts Options) *Server {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{opts: opts, log: opts.Log, echo: e}
	e.HTTPErrorHandler = s.errorHandler
	s.routes(e)
	return s
}

// Handler is the root http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Echo exposes the router (tests, extra routes).
func (s *Server) Echo() *echo.Echo { return s.echo }

// writeJSON writes v with the exact Content-Type given.
func writeJSON(c echo.Context, status int, contentType string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(status, contentType, b)
}

// Health: /healthz says the process is up; /readyz that the store answers.
func (s *Server) healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.opts.Store.Ping(ctx); err != nil {
		logger(c).Warn().Err(err).Msg("readiness check: store unreachable")
		return writeJSON(c, http.StatusServiceUnavailable, echo.MIMEApplicationJSON, map[string]string{"status": "store unreachable"})
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]string{"status": "ready"})
}
