// Package app assembles msgapi from its parts. It is the one composition
// path: cmd/msgapi builds the server through New from its settings, and the
// tests (api/apitest) through the same New with theirs, so that a test
// server is the production server on another store. Collections is the one
// list of collections both create.
package app

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/hubspot"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/metrics"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/receipts"
	"github.com/msgapi/msgapi/schedule"
	"github.com/msgapi/msgapi/send"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/workspace"
)

// Collections is every collection msgapi uses, created at start-up.
func Collections() []store.Collection {
	var c []store.Collection
	for _, cs := range [][]store.Collection{workspace.Collections, messages.Collections, consent.Collections, guard.Collections, idempotency.Collections, inbound.Collections, notify.Collections, receipts.Collections, hubspot.Collections, schedule.Collections} {
		c = append(c, cs...)
	}
	return c
}

// Options are the settings and the parts New does not build itself.
type Options struct {
	Store      *store.Store     // required
	Workspaces *workspace.Store // required
	Messages   *messages.Store  // required
	Log        zerolog.Logger
	// Senders by channel (send.Options.Senders).
	Senders       map[string]send.Sender
	DefaultRegion string
	// AdminToken enables /admin/* when non-empty.
	AdminToken string
	// Lifetime ends when the process gives up on in-flight work
	// (send.Options.Lifetime).
	Lifetime context.Context
	// SendTimeout is the providers' timeout (send.Options.SendTimeout: a
	// pending answer's Retry-After).
	SendTimeout time.Duration
	// TestSender sends every message of a test key (send.Options.TestSender).
	TestSender send.Sender
	// PublicURL makes problem types absolute (api.Options.PublicURL).
	PublicURL string

	// Guard configures the duplicate guard; New sets Store, Sibling and
	// Fence.
	Guard guard.Options
	// Idempotency configures the Idempotency-Key layer; New sets Store,
	// WorkspaceID, Body and Commits (and Outcome from Metrics when unset).
	Idempotency idempotency.Options
	// Outbox, optional, records event webhooks (package notify) on the send
	// path, receipts and inbound messages, and enables their routes. New
	// does not run its dispatcher.
	Outbox *notify.Outbox
	// Consent, optional, is the suppression list every send checks, and
	// with Unsubscribe (its token sealer) the routes that manage it.
	Consent     *consent.Store
	Unsubscribe *consent.Tokens
	// Inbound configures vendor webhooks; New sets Store, Workspaces,
	// Messages and OnMessage (the caller sets OnReply).
	Inbound inbound.Options
	// Receipts configures delivery receipts; New sets Store, Messages and
	// OnStatus.
	Receipts receipts.Options
	// HubSpot configures the HubSpot custom action's callbacks; New sets
	// Store, Messages and Token (the workspace's hubspot-token secret). New
	// does not run them (App.HubSpot.Run).
	HubSpot hubspot.Options
	// OutcomeAfter is how old a message still sending must be for the
	// outcome sweeper to decide it (send timeout + margin); 0: no sweeper.
	OutcomeAfter time.Duration

	// Metrics, optional, serves GET /metrics and observes requests, sends,
	// keys, lost outcomes and 429s.
	Metrics *metrics.Metrics
	// Limiter limits POST /api/messages per workspace (nil: no limit).
	Limiter   api.RateLimiter
	RateLimit ratelimit.Limit
	// OnRateLimited observes each 429 (default: Metrics.RateLimited).
	OnRateLimited func(route, workspaceID string)
}

// App is msgapi, built.
type App struct {
	Server  *api.Server
	Send    *send.Service
	Guard   *guard.Guard
	Sweeper *send.Sweeper // nil without Options.OutcomeAfter
	// Scheduler sends scheduled messages at their time (nil without
	// Options.OutcomeAfter); New does not run it.
	Scheduler *send.Scheduler
	HubSpot   *hubspot.Callbacks
}

// New builds the app. It starts nothing: the caller runs the outbox's
// dispatcher, the sweeper and the store's reaper as it sees fit.
func New(o Options) (*App, error) {
	if o.Store == nil || o.Workspaces == nil || o.Messages == nil {
		return nil, errors.New("app.New: Store, Workspaces and Messages are required")
	}
	st, ms, met := o.Store, o.Messages, o.Metrics
	a := &App{}

	// Event webhooks: every outcome's event is durable no later than the
	// outcome (ms.OnOutcome).
	var record func(ctx context.Context, m messages.Message) error
	if o.Outbox != nil {
		ms.OnOutcome(o.Outbox)
		record = o.Outbox.RecordMessage
	}

	g := o.Guard
	g.Store, g.Sibling, g.Fence = st, send.Sibling(ms), ms.Fence
	a.Guard = guard.New(g)

	so := send.Options{Messages: ms, Guard: a.Guard, Senders: o.Senders, DefaultRegion: o.DefaultRegion, Lifetime: o.Lifetime,
		SendTimeout: o.SendTimeout, TestSender: o.TestSender, Schedule: schedule.New(st), Workspaces: o.Workspaces.Find}
	if met != nil {
		so.Metrics = met
	}
	if o.Outbox != nil {
		so.OnDuplicate, so.OnSuppressed, so.OnScheduled = o.Outbox.RecordDuplicate, o.Outbox.RecordMessage, o.Outbox.RecordMessage
	}
	if o.Consent != nil {
		so.Suppressed, so.SuppressionDoc = o.Consent.Suppressed, consent.Doc
	}
	so.Store = st
	var err error
	if a.Send, err = send.New(so); err != nil {
		return nil, err
	}
	if o.OutcomeAfter > 0 {
		sw := send.SweeperOptions{Messages: ms, Holders: a.Guard.Holders, After: o.OutcomeAfter, Log: o.Log}
		if met != nil {
			sw.Lost = met.OutcomeLost
		}
		a.Sweeper = send.NewSweeper(sw)
		so := send.SchedulerOptions{After: o.OutcomeAfter, Log: o.Log}
		if met != nil {
			so.Lost = met.OutcomeLost
		}
		a.Scheduler = a.Send.Scheduler(so)
	}

	io := o.Idempotency
	io.Store, io.WorkspaceID, io.Body, io.Commits = st, api.WorkspaceID, api.Body, send.Commits{Messages: ms}
	io.BodyMember = "idempotencyKey" // README: Keys engines can send
	if io.Outcome == nil && met != nil {
		io.Outcome = met.Idempotency
	}
	keys := idempotency.New(io)

	in := o.Inbound
	in.Store, in.Workspaces, in.Messages, in.OnMessage = st, o.Workspaces, ms, record
	rc := o.Receipts
	rc.Store, rc.Messages, rc.OnStatus = st, ms, record
	rcpts := receipts.New(rc)

	ho := o.HubSpot
	ho.Store, ho.Messages = st, ms
	ho.Token = func(ctx context.Context, workspaceID string) (string, error) {
		w, err := o.Workspaces.Find(ctx, workspaceID)
		if err != nil {
			return "", err
		}
		return o.Workspaces.Secret(w, api.SecretHubSpotToken)
	}
	a.HubSpot = hubspot.New(ho)

	ao := api.Options{
		Log: o.Log, Store: st, Workspaces: o.Workspaces, AdminToken: o.AdminToken,
		Send: a.Send, Messages: ms, Idempotency: keys, Outbox: o.Outbox, Consent: o.Consent, Unsubscribe: o.Unsubscribe,
		Inbound: inbound.New(in).Receive, TwilioReceipt: rcpts.Twilio, RelayReceipt: rcpts.Relay,
		Limiter: o.Limiter, RateLimit: o.RateLimit, OnRateLimited: o.OnRateLimited, PublicURL: o.PublicURL,
		TrustedProxies: o.Inbound.TrustedProxies, HubSpot: a.HubSpot,
	}
	if met != nil {
		ao.Metrics = met.Handler()
		ao.Middleware = append(ao.Middleware, met.Middleware)
		if ao.OnRateLimited == nil {
			ao.OnRateLimited = met.RateLimited
		}
	}
	a.Server = api.New(ao)
	return a, nil
}
