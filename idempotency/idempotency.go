// Package idempotency implements the Idempotency-Key header (IETF httpapi
// draft, Stripe semantics): a request retried with the same key within 24 h
// gets the first response back byte for byte instead of running again.
//
// It decides, per (workspace, method, path, key), whether a request runs,
// replays, or is refused: 422 when the key was used with a different request,
// 409 with Retry-After while the first one is still running. Every change of
// ownership of a record is decided atomically: a claim inserts the record
// (a unique insert), and replacing a generation of it (a crashed holder's
// claim, an expired record, our own claim when we complete or release it)
// is a write conditional on that generation's token, which exactly one
// request can make (record.go: generation).
//
// Only responses of requests that reached the send stage (Handler)
// and ended below 500 are stored. A request that stopped before it releases
// the key, so a corrected retry runs. A 5xx after the send stage keeps the
// claim until its lease ends: the message may already exist, so an
// immediate retry must get 409.
//
// A request that reached the send stage is never run again, for the key's
// whole lifetime, whatever happens to its process: every claim names the
// commit id (the message id) of its request from the start (Commits), and
// a retry that finds a claim whose lease ended answers from what that id
// became — the message's answer once it is final, 409 while it is still
// with the provider — and fences an id whose message was never written
// (a tombstone), so that the stalled holder can never send after the key
// is taken over.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/store"
)

// Defaults (SPEC: keys live 24 h from the first request; a holder's lease
// is 60 s).
const (
	DefaultTTL   = 24 * time.Hour
	DefaultLease = 60 * time.Second
)

const (
	// ReplayedHeader marks a replayed response.
	ReplayedHeader = "Idempotent-Replayed"
	// retryAfter is what a 409 suggests: sends take well under a second.
	retryAfter = time.Second
	// finishTimeout bounds storing or releasing after the response; it runs
	// even when the client has gone away.
	finishTimeout = 10 * time.Second
	// attempts bounds the read-decide loop when other requests keep
	// changing the record under us.
	attempts = 4
)

// Options configure New.
type Options struct {
	Store *store.Store
	// TTL is how long a key lives, counted from the first request (default 24h).
	TTL time.Duration
	// Lease is how long an in-progress claim is protected; past it the
	// holder is presumed dead and the next request takes over (default 60s).
	Lease time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// WorkspaceID returns the authenticated workspace (set by earlier middleware).
	WorkspaceID func(c echo.Context) string
	// Body returns the already-read request body (earlier middleware
	// enforces the size limit).
	Body func(c echo.Context) []byte
	// Outcome, optional, is told how each keyed request was decided:
	// "executed", "replayed", "in_flight" or "fingerprint_mismatch" (metrics).
	Outcome func(outcome string)
	// BodyMember, optional, names a member of a JSON object body that
	// carries the key as the header does, for callers that cannot set
	// headers (HubSpot's webhook action): "idempotencyKey". Both present
	// and different is 400; the member is left out of the fingerprint.
	BodyMember string
	// Commits, optional, is the guarded requests' commit point. Without it
	// a key whose holder's lease ended is taken over and its request run
	// again (routes that send nothing need no more).
	Commits Commits
}

// Commits is what the key layer needs of the commit point of the requests
// it guards: the document whose insert decides that a request sent (on the
// send route, the message).
type Commits interface {
	// NewID allocates a fresh commit id for a claim.
	NewID() string
	// Resolve tells what became of the request whose commit id is id.
	Resolve(ctx context.Context, id string) (Resolution, error)
	// Fence inserts a tombstone under each id so that nothing can be
	// committed under it afterwards; won[i] is false when ids[i] already
	// held a document.
	Fence(ctx context.Context, reason string, ids ...string) (won []bool, err error)
}

// CommitState is what became of a commit id.
type CommitState int

// The commit states.
const (
	CommitMissing  CommitState = iota + 1 // nothing under the id (yet)
	CommitFenced                          // a tombstone: the request never sent; it may run again
	CommitInFlight                        // committed, outcome not known yet
	CommitDone                            // committed and final: the Resolution is its answer
)

// Resolution is Commits.Resolve's answer; CommitDone carries the response
// to store and replay.
type Resolution struct {
	State       CommitState
	Status      int
	ContentType string
	Body        []byte
}

// Keys is the Idempotency-Key store and middleware.
type Keys struct {
	store       *store.Store
	ttl, lease  time.Duration
	now         func() time.Time
	workspaceID func(c echo.Context) string
	body        func(c echo.Context) []byte
	outcome     func(string)
	commits     Commits
	bodyMember  string
}

// New returns Keys. Store, WorkspaceID and Body are required.
func New(o Options) *Keys {
	if o.Store == nil || o.WorkspaceID == nil || o.Body == nil {
		panic("idempotency.New: Store, WorkspaceID and Body are required")
	}
	k := &Keys{store: o.Store, ttl: o.TTL, lease: o.Lease, now: o.Now, workspaceID: o.WorkspaceID, body: o.Body, outcome: o.Outcome, commits: o.Commits, bodyMember: o.BodyMember}
	if k.outcome == nil {
		k.outcome = func(string) {}
	}
	if k.ttl <= 0 {
		k.ttl = DefaultTTL
	}
	if k.lease <= 0 {
		k.lease = DefaultLease
	}
	if k.now == nil {
		k.now = time.Now
	}
	// Records are owned: only Reap deletes them, through claims.
	o.Store.ReapWith(keysCollection, k.Reap)
	return k
}

// Handler is a route the key layer guards (Wrap). commitID is the commit
// id (message id) that the request's claim names, for the handler to
// write its commit point under; "" for a request without an
// Idempotency-Key (or without Options.Commits), which allocates its own.
// sendStage reports whether the request reached the send stage: its
// commit point is written, so its response must be stored and a retry must
// never run it again.
type Handler func(c echo.Context, commitID string) (sendStage bool, err error)

// request is what the middleware knows about the request at hand.
type request struct {
	id, fingerprint string
	workspace, key  string
	method, path    string
	log             *zerolog.Logger
}

// Wrap applies the Idempotency-Key header to h. Mount the result after
// authentication and body reading; h validates.
//
// Round trips: no header 0; replay, 409 and 422 1; a request that runs 3
// (read, claim insert, then the write, conditional on its claim, that
// stores or releases it); a request that takes over a dead or expired
// record 3 too (the claim is a rewrite conditional on the generation it
// replaces); a request that loses a claim or takeover race 3 (read, write,
// read again).
func (k *Keys) Wrap(h Handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		body := k.body(c)
		key, fpBody, err := keyOf(r.Header.Values(Header), body, k.bodyMember)
		if err != nil {
			return err
		}
		if key == "" {
			_, err := h(c, "")
			return err
		}
		ws := k.workspaceID(c)
		if ws == "" {
			return errors.New("idempotency: no authenticated workspace; mount the middleware after authentication")
		}
		q := request{
			id:          RecordID(ws, r.Method, r.URL.Path, key),
			fingerprint: Fingerprint(r.Method, r.URL.Path, fpBody),
			workspace:   ws, key: key, method: r.Method, path: r.URL.Path,
			log: zerolog.Ctx(r.Context()),
		}

		claim, replay, err := k.acquire(r.Context(), q)
		if err != nil {
			switch msgapi.ErrorCode(err) {
			case msgapi.CodeIdempotencyInFlight:
				k.outcome("in_flight")
			case msgapi.CodeIdempotencyMismatch:
				k.outcome("fingerprint_mismatch")
			}
			return err
		}
		if replay != nil {
			k.outcome("replayed")
			q.event(zerolog.InfoLevel, events.IdempotentReplay).Int("status", replay.Status).Msg("idempotent replay")
			return writeReplay(c, replay)
		}
		k.outcome("executed")
		return k.run(c, h, q, claim)
	}
}

// writeReplay writes the stored response byte for byte.
func writeReplay(c echo.Context, rec *record) error {
	res := c.Response()
	if rec.ContentType != "" { // else net/http sniffs it again, as it did the first time
		res.Header().Set(echo.HeaderContentType, rec.ContentType)
	}
	res.Header().Set(ReplayedHeader, "true")
	res.WriteHeader(rec.Status)
	_, err := res.Write(rec.Body)
	return err
}

// run calls h while holding claim, then stores the response or releases
// the claim.
func (k *Keys) run(c echo.Context, h Handler, q request, claim record) error {
	var sendStage bool
	res := c.Response()
	w := &capture{ResponseWriter: res.Writer}
	res.Writer = w
	err := func() (err error) {
		defer func() { res.Writer = w.ResponseWriter }()
		defer func() {
			// A panic is settled like any failure: the claim is released
			// before the send stage and kept after it (a retry after the
			// lease answers from the message). The handler returned
			// nothing, so its commit point says which: the claim is
			// released only when nothing was committed under its id. The
			// panic goes on up, to the server's own recovery, which answers
			// 500 and logs the stack.
			if r := recover(); r != nil {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), finishTimeout)
				defer cancel()
				if !k.committed(ctx, claim) {
					k.release(ctx, q, claim)
				}
				panic(r)
			}
		}()
		sendStage, err = h(c, claim.CommitID)
		if err != nil {
			c.Error(err) // render now, so the response is complete and captured
		}
		return err
	}()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), finishTimeout)
	defer cancel()
	switch {
	case !sendStage:
		k.release(ctx, q, claim)
	case w.status == 0 || w.status >= 500 || w.overflow:
		q.event(zerolog.WarnLevel, "").Int("status", w.status).Bool("overflow", w.overflow).
			Msg("response after the send stage not stored; the key stays in progress until its lease ends")
	default:
		k.complete(ctx, q, claim, w)
	}
	return err
}

// committed reports whether the request of claim, whose handler panicked,
// reached the send stage: anything but nothing (or a tombstone) under its
// commit id. A store that cannot tell counts as committed, so that the key
// is kept until its lease ends and a retry then settles it.
func (k *Keys) committed(ctx context.Context, claim record) bool {
	if claim.CommitID == "" || k.commits == nil {
		return false
	}
	res, err := k.commits.Resolve(ctx, claim.CommitID)
	return err != nil || (res.State != CommitMissing && res.State != CommitFenced)
}

// acquire decides the request: a claim to run under, a completed record to
// replay, or an error (409, 422, 503).
func (k *Keys) acquire(ctx context.Context, q request) (claim record, replay *record, err error) {
	for range attempts {
		rec, found, err := k.find(ctx, q.id)
		if err != nil {
			return record{}, nil, msgapi.Unavailable(err)
		}
		now := k.now()
		switch {
		case !found:
			claim = k.newClaim(q, now, now, now.Add(k.ttl))
			err := k.insert(ctx, claim)
			if err == nil {
				return claim, nil, nil
			}
			if !store.IsDuplicateKey(err) {
				return record{}, nil, msgapi.Unavailable(err)
			}
			continue // another request claimed it first: follow its record

		case !rec.ExpiresAt.After(now):
			// Expired: a new first request, whatever the record says and
			// whether or not the reaper has removed it yet. A holder still
			// in progress is fenced first, however unlikely after a day.
			if rec.State == stateInProgress {
				if _, err := k.settle(ctx, rec); err != nil {
					return record{}, nil, msgapi.Unavailable(err)
				}
			}
			claim = k.newClaim(q, now, now, now.Add(k.ttl))
			won, err := k.replace(ctx, rec, claim)
			if err != nil {
				return record{}, nil, msgapi.Unavailable(err)
			}
			if won {
				return claim, nil, nil
			}
			continue // another request replaced it first: follow its record

		case rec.Fingerprint != q.fingerprint:
			q.event(zerolog.InfoLevel, events.IdempotencyConflict).Str("reason", "fingerprint_mismatch").Str("state", rec.State).
				Msg("idempotency key reused with a different request")
			return record{}, nil, &msgapi.Error{
				Code:    msgapi.CodeIdempotencyMismatch,
				Message: "this Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request",
			}

		case rec.State == stateCompleted:
			return record{}, &rec, nil

		case now.Before(rec.LeaseUntil):
			return record{}, nil, k.inFlight(q, min(retryAfter, rec.LeaseUntil.Sub(now)))

		default:
			// The holder's lease ended without a stored result: it crashed,
			// or is far slower than the lease. If its request committed, its
			// message is the answer: never run it again.
			res, err := k.settle(ctx, rec)
			if err != nil {
				return record{}, nil, msgapi.Unavailable(err)
			}
			switch res.State {
			case CommitInFlight:
				return record{}, nil, k.inFlight(q, retryAfter)
			case CommitDone:
				done, won, err := k.completeFrom(ctx, rec, res, now)
				if err != nil {
					return record{}, nil, msgapi.Unavailable(err)
				}
				if won {
					q.event(zerolog.WarnLevel, "").Str("commitId", rec.CommitID).Int("status", res.Status).
						Msg("idempotency claim whose lease ended answered from its committed message")
					return record{}, &done, nil
				}
				continue // another request replaced it first: follow its record
			}
			// Fenced (or no commit point): it never sent. Take over and run
			// it, keeping the key's lifetime counted from the first request.
			claim = k.newClaim(q, now, rec.CreatedAt, rec.ExpiresAt)
			won, err := k.replace(ctx, rec, claim)
			if err != nil {
				return record{}, nil, msgapi.Unavailable(err)
			}
			if won {
				q.event(zerolog.WarnLevel, "").Str("replacedToken", rec.Token).Time("leaseUntil", rec.LeaseUntil).
					Msg("idempotency claim taken over from a holder whose lease ended")
				return claim, nil, nil
			}
			// Another request replaced it first: follow its record.
		}
	}
	return record{}, nil, k.inFlight(q, retryAfter)
}

func (k *Keys) newClaim(q request, now, created, expires time.Time) record {
	r := record{
		ID: q.id, WorkspaceID: q.workspace, Method: q.method, Path: q.path,
		Fingerprint: q.fingerprint, State: stateInProgress, Token: newToken(),
		ClaimedAt: now, LeaseUntil: now.Add(k.lease), CreatedAt: created, ExpiresAt: expires,
	}
	if k.commits != nil {
		r.CommitID = k.commits.NewID()
	}
	return r
}

// settle tells what became of the request of rec, an in-progress claim. A
// commit id with nothing under it is fenced: its holder is declared gone
// and must never commit. Without a commit id (or Commits) the request is
// treated as fenced: nothing is known to have been sent.
func (k *Keys) settle(ctx context.Context, rec record) (Resolution, error) {
	if rec.CommitID == "" || k.commits == nil {
		return Resolution{State: CommitFenced}, nil
	}
	for range 2 {
		res, err := k.commits.Resolve(ctx, rec.CommitID)
		if err != nil || res.State != CommitMissing {
			return res, err
		}
		won, err := k.commits.Fence(ctx, "idempotency_lease", rec.CommitID)
		if err != nil {
			return Resolution{}, err
		}
		if len(won) == 1 && won[0] {
			return Resolution{State: CommitFenced}, nil
		}
		// Committed (or fenced by another) just now: resolve again.
	}
	return Resolution{}, fmt.Errorf("commit %s of idempotency record %s neither written nor fenced", rec.CommitID, rec.ID)
}

// completeFrom stores res, the answer of rec's committed request, as the
// record's completed response, if rec's generation is still ours to end.
func (k *Keys) completeFrom(ctx context.Context, rec record, res Resolution, now time.Time) (record, bool, error) {
	done := rec
	done.State = stateCompleted
	done.Token = newToken()
	done.Status, done.ContentType, done.Body = res.Status, res.ContentType, res.Body
	done.CompletedAt = now
	won, err := k.replace(ctx, rec, done)
	if err != nil || !won {
		return record{}, false, err
	}
	return done, true, nil
}

func (k *Keys) inFlight(q request, after time.Duration) error {
	q.event(zerolog.InfoLevel, events.IdempotencyConflict).Str("reason", "in_flight").Dur("retryAfter", after).
		Msg("idempotency key in use by a request still in progress")
	return &msgapi.Error{
		Code:       msgapi.CodeIdempotencyInFlight,
		Message:    "a request with this Idempotency-Key is still being processed; retry after it completes",
		RetryAfter: after,
	}
}

// complete stores the captured response under the claim, if the claim is
// still ours: the rewrite is conditional on our generation, so it lands
// only if nobody took the claim over.
func (k *Keys) complete(ctx context.Context, q request, claim record, w *capture) {
	done := claim
	done.State = stateCompleted
	done.Token = newToken() // a new generation, so that it can expire and be taken over in turn
	done.Status = w.status
	done.ContentType = w.contentType
	done.Body = w.body.Bytes()
	done.CompletedAt = k.now()
	won, err := k.replace(ctx, claim, done)
	if err != nil || !won {
		q.event(zerolog.WarnLevel, "").Err(err).Bool("takenOver", !won && err == nil).
			Msg("idempotent response not stored: the claim was lost or the store failed")
	}
}

// release deletes our claim so that a corrected retry runs.
func (k *Keys) release(ctx context.Context, q request, claim record) {
	if _, err := k.remove(ctx, claim.ID, claim.Token); err != nil {
		q.event(zerolog.WarnLevel, "").Err(err).Msg("idempotency claim not released; it frees itself when its lease ends")
	}
}

// event starts a log line about this request's key on the request logger.
// The key is caller-chosen and not secret, so it is in the line; the record
// id is what ops search by. Neither is ever a Loki label.
func (q request) event(level zerolog.Level, name string) *zerolog.Event {
	e := q.log.WithLevel(level)
	if name != "" {
		e = e.Str("event", name)
	}
	return e.Str("workspaceId", q.workspace).
		Str("idempotencyRecordId", q.id).
		Str("idempotencyKey", q.key).
		Str("method", q.method).
		Str("path", q.path)
}
