package hubspot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store"
)

const (
	collCallbacks = "hubspot_callbacks" // BLOCKed executions waiting for their message's outcome
	collClaims    = "hubspot_claims"    // claim(callback, attempt), inserted before the HTTP call
	// DefaultAPIBase is HubSpot's API origin.
	DefaultAPIBase = "https://api.hubapi.com"
	batchSize      = 100
)

// Collections are the store collections the callbacks use; both expire
// (TTL index on MongoDB, the reaper on the embedded engine).
var Collections = []store.Collection{
	{Name: collCallbacks, ExpiresField: "expiresAt"},
	{Name: collClaims, ExpiresField: "expiresAt"},
}

// Options configure Callbacks. Zero values take the defaults.
type Options struct {
	Store    *store.Store
	Messages *messages.Store
	// Token is the workspace's HubSpot access token (its "hubspot-token"
	// secret), the Bearer of the callback API.
	Token func(ctx context.Context, workspaceID string) (string, error)
	// APIBase is HubSpot's API origin (default DefaultAPIBase; tests point
	// it at a local server).
	APIBase string
	Client  *http.Client
	Log     zerolog.Logger
	Now     func() time.Time
	// Poll is how often waiting executions are looked at (default 1s).
	Poll time.Duration
	// Timeout bounds one call to HubSpot (default 10s). A claim without an
	// outcome after twice this (its process died) lets the next attempt go.
	Timeout time.Duration
	// Expire is how long an execution is kept trying (default 24h, the
	// hs_expiration_duration msgapi asks for).
	Expire time.Duration
}

// Callbacks completes BLOCKed executions once their message's outcome is
// known: Block records one durably (before the BLOCK answer is written);
// Run, in every process, completes it at HubSpot's
// POST /automation/v4/actions/callbacks/{callbackId}/complete, retrying
// 429, 5xx and transport errors with backoff until Expire. Every attempt is
// claimed by inserting claim(callback, n) first: two processes never make
// the same attempt, and a process killed mid-call costs one repeat at most.
type Callbacks struct {
	opts            Options
	pending, claims *mongo.Collection
	now             func() time.Time
}

type callback struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	CallbackID  string    `bson:"callbackId"`
	MessageID   string    `bson:"messageId"`
	Attempt     int       `bson:"attempt"` // the next attempt's number, from 1
	DueAt       time.Time `bson:"dueAt"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

type claim struct {
	ID        string    `bson:"_id"`
	At        time.Time `bson:"at"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// New returns Callbacks; Run starts its loop.
func New(o Options) *Callbacks {
	if o.APIBase == "" {
		o.APIBase = DefaultAPIBase
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Expire <= 0 {
		o.Expire = 24 * time.Hour
	}
	return &Callbacks{opts: o, pending: o.Store.Collection(collCallbacks), claims: o.Store.Collection(collClaims),
		now: func() time.Time { return o.Now().UTC().Truncate(time.Millisecond) }}
}

func callbackDocID(workspaceID, callbackID string) string {
	return "hcb_" + msgapi.HashID(workspaceID, callbackID)
}

// Block records that the execution callbackID waits for messageID's
// outcome. One insert; a repeat (HubSpot retried the call) is a no-op.
func (c *Callbacks) Block(ctx context.Context, workspaceID, callbackID, messageID string) error {
	now := c.now()
	_, err := c.pending.InsertOne(ctx, callback{ID: callbackDocID(workspaceID, callbackID), WorkspaceID: workspaceID,
		CallbackID: callbackID, MessageID: messageID, Attempt: 1, DueAt: now, ExpiresAt: now.Add(c.opts.Expire)})
	if err != nil && !store.IsDuplicateKey(err) {
		return msgapi.Unavailable(fmt.Errorf("record HubSpot callback %s: %w", callbackID, err))
	}
	return nil
}

// Run completes due executions until ctx ends.
func (c *Callbacks) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Poll)
	defer t.Stop()
	for {
		c.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Callbacks) pass(ctx context.Context) {
	var due []callback
	cur, err := c.pending.Find(ctx, bson.D{{Key: "dueAt", Value: bson.D{{Key: "$lte", Value: c.now()}}}}, options.Find().SetLimit(batchSize))
	if err == nil {
		err = cur.All(ctx, &due)
	}
	if err != nil && ctx.Err() == nil {
		c.opts.Log.Warn().Err(err).Str("event", events.HubSpotStoreError).Msg("hubspot: could not read the waiting executions; reading again at the next poll")
	}
	for _, cb := range due {
		if ctx.Err() != nil {
			return
		}
		c.handle(ctx, cb)
	}
}

// handle looks at one due execution: wait on, complete, or give up.
func (c *Callbacks) handle(ctx context.Context, cb callback) {
	log := c.opts.Log.With().Str("workspaceId", cb.WorkspaceID).Str("callbackId", cb.CallbackID).Str("messageId", cb.MessageID).Logger()
	if !c.now().Before(cb.ExpiresAt) {
		log.Error().Str("event", events.HubSpotCallbackFailed).Int("attempts", cb.Attempt-1).Msg("hubspot: gave up completing the execution; it expires at HubSpot")
		_, _ = c.pending.DeleteOne(ctx, store.ByID(cb.ID))
		return
	}
	m, found, err := c.opts.Messages.Get(ctx, cb.MessageID)
	if err != nil {
		return // the next pass tries again
	}
	if !found || m.WorkspaceID != cb.WorkspaceID || !messages.Final(m.Status) || messages.Due(m.Status) {
		c.later(ctx, cb, cb.Attempt, c.opts.Poll)
		return
	}
	// Claim the attempt: only the inserter calls HubSpot.
	clID := cb.ID + ":" + strconv.Itoa(cb.Attempt)
	if _, err := c.claims.InsertOne(ctx, claim{ID: clID, At: c.now(), ExpiresAt: cb.ExpiresAt}); err != nil {
		if !store.IsDuplicateKey(err) {
			return
		}
		var have claim
		if c.claims.FindOne(ctx, store.ByID(clID)).Decode(&have) == nil && c.now().Sub(have.At) > 2*c.opts.Timeout {
			// Its claimer died mid-call: the next attempt goes.
			c.later(ctx, cb, cb.Attempt+1, 0)
		}
		return
	}
	a := Answer{MessageID: m.ID, Status: m.Status, DuplicateOnly: true}
	status, retryAfter, body, err := c.call(ctx, cb, a)
	switch {
	case err == nil && status/100 == 2:
		log.Info().Str("event", events.HubSpotCallbackDone).Int("attempt", cb.Attempt).Str("status", m.Status).Str("state", State(a)).Msg("hubspot: execution completed")
		_, _ = c.pending.DeleteOne(ctx, store.ByID(cb.ID))
	case err == nil && status/100 == 4 && status != http.StatusTooManyRequests:
		// HubSpot will not take it (an unknown or already completed
		// callback, a revoked token): retrying changes nothing.
		log.Error().Str("event", events.HubSpotCallbackFailed).Int("attempt", cb.Attempt).Int("statusCode", status).Str("body", body).Msg("hubspot: the callback API refused the completion")
		_, _ = c.pending.DeleteOne(ctx, store.ByID(cb.ID))
	default:
		wait := backoff(cb.Attempt)
		if retryAfter > wait {
			wait = min(retryAfter, time.Hour)
		}
		ev := log.Warn().Str("event", events.HubSpotCallbackFailed).Int("attempt", cb.Attempt).Dur("retryIn", wait)
		if err != nil {
			ev = ev.Err(err)
		} else {
			ev = ev.Int("statusCode", status)
		}
		ev.Msg("hubspot: completion failed; retrying")
		c.later(ctx, cb, cb.Attempt+1, wait)
	}
}

// later reschedules cb as attempt n after wait.
func (c *Callbacks) later(ctx context.Context, cb callback, n int, wait time.Duration) {
	_, _ = c.pending.UpdateOne(ctx, store.ByID(cb.ID), bson.D{{Key: "$set", Value: bson.D{
		{Key: "attempt", Value: n}, {Key: "dueAt", Value: c.now().Add(wait)}}}})
}

// backoff is the wait after the n-th failed attempt: 1s, 5s, 30s, 2m, 10m,
// then every 30m.
func backoff(n int) time.Duration {
	steps := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	if n-1 < len(steps) {
		return steps[max(0, n-1)]
	}
	return 30 * time.Minute
}

// call posts the completion; it answers HubSpot's status, its Retry-After
// and up to 1 KiB of its body.
func (c *Callbacks) call(ctx context.Context, cb callback, a Answer) (int, time.Duration, string, error) {
	token, err := c.opts.Token(ctx, cb.WorkspaceID)
	if err != nil {
		return 0, 0, "", err
	}
	if token == "" {
		return 0, 0, "", fmt.Errorf("workspace %s has no hubspot-token secret: PUT /admin/workspaces/%s/secrets/hubspot-token", cb.WorkspaceID, cb.WorkspaceID)
	}
	body, _ := json.Marshal(map[string]any{"outputFields": Outputs(a)})
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	u := c.opts.APIBase + "/automation/v4/actions/callbacks/" + url.PathEscape(cb.CallbackID) + "/complete"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.opts.Client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	var ra time.Duration
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		ra = time.Duration(s) * time.Second
	}
	return res.StatusCode, ra, string(b), nil
}
