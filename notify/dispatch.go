package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/egress"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/store"
)

const (
	// BatchSize bounds each scan of the due deliveries.
	BatchSize = 100
	// PendingBatch bounds each scan of the pending events: a pass archives
	// up to this many, in commands of archiveChunk (archiveQuiet).
	PendingBatch = 500
	archiveChunk = 100
	// maxResponseBody is how much of an endpoint's answer is kept.
	maxResponseBody = 1024
	userAgent       = "msgapi-webhooks"
)

// delivery is one event on its way to one endpoint: the schedule of its
// next attempt. Only the backlog lives in outbox_deliveries; a delivery is
// deleted when it succeeds, runs out of attempts or loses its endpoint.
type delivery struct {
	ID          string    `bson:"_id"`
	EventID     string    `bson:"eventId"`
	EndpointID  string    `bson:"endpointId"`
	WorkspaceID string    `bson:"workspaceId"`
	Attempt     int       `bson:"attempt"` // the next attempt's number, from 1
	DueAt       time.Time `bson:"dueAt"`
	Manual      bool      `bson:"manual,omitempty"`
}

// DeliveryID is the _id of an event's automatic delivery to an endpoint;
// round > 0 names the round-th manual redelivery.
func DeliveryID(eventID, endpointID string, round int) string {
	return "dlv_" + msgapi.HashID(eventID, endpointID, strconv.Itoa(round))
}

// attempt is the claim of one attempt, inserted before the HTTP call.
type attempt struct {
	ID         string    `bson:"_id"`
	DeliveryID string    `bson:"deliveryId"`
	N          int       `bson:"n"`
	StartedAt  time.Time `bson:"startedAt"`
	LeaseUntil time.Time `bson:"leaseUntil"`
	ExpiresAt  time.Time `bson:"expiresAt"`
}

// result is what one attempt got, inserted after the HTTP call.
type result struct {
	ID         string     `bson:"_id"`
	StatusCode int        `bson:"statusCode,omitempty"`
	LatencyMs  int64      `bson:"latencyMs"`
	Error      string     `bson:"error,omitempty"`
	Body       string     `bson:"body,omitempty"`
	Success    bool       `bson:"success"`
	At         time.Time  `bson:"at"`
	NextAt     *time.Time `bson:"nextAt,omitempty"` // the next attempt, if any
	ExpiresAt  time.Time  `bson:"expiresAt"`
}

func attemptID(deliveryID string, n int) string {
	return "att_" + msgapi.HashID(deliveryID, strconv.Itoa(n))
}
func resultID(deliveryID string, n int) string {
	return "res_" + msgapi.HashID(deliveryID, strconv.Itoa(n))
}

// Run dispatches until ctx ends: it moves pending events into the archive
// and their deliveries, and runs due attempts on Workers goroutines. It
// returns once the running attempts have finished (each is bounded by
// Timeout).
func (o *Outbox) Run(ctx context.Context) {
	work := make(chan delivery, o.opts.Workers)
	var wg sync.WaitGroup
	for range o.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				o.attempt(context.WithoutCancel(ctx), d)
				o.finished(d)
			}
		}()
	}
	t := time.NewTicker(o.opts.PollInterval)
	defer func() {
		t.Stop()
		close(work)
		wg.Wait()
	}()
	for {
		if o.pass(ctx, work) > 0 {
			// Events are coming in: let them gather for a moment, so that
			// the next pass archives many in the same few commands rather
			// than a few in as many.
			select {
			case <-ctx.Done():
				return
			case <-time.After(passLinger):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.wake:
		}
	}
}

// mine keeps the pending events this dispatcher should handle now: those
// its own process recorded, and another process's once this dispatcher has
// seen them pending for otherGrace (that process is gone, or behind). So
// dispatchers of several processes do not archive the same events at once,
// which would append each to the workspace's log twice (every dispatcher
// reads the same backlog; a pass archives up to PendingBatch events
// together). How long an event has waited is judged on this process's
// clock, not from its createdAt, which another process's clock wrote.
func (o *Outbox) mine(pend []event) []event {
	now := time.Now()
	o.seenMu.Lock()
	defer o.seenMu.Unlock()
	next := make(map[string]time.Time, len(o.seenOthers))
	out := pend[:0]
	for _, e := range pend {
		if e.Owner == "" || e.Owner == o.owner {
			out = append(out, e)
			continue
		}
		first, ok := o.seenOthers[e.ID]
		if !ok {
			first = now
		}
		next[e.ID] = first
		if now.Sub(first) >= o.otherGrace {
			out = append(out, e)
		}
	}
	o.seenOthers = next // forget what is no longer pending
	return out
}

// otherGrace is how long another process's pending event waits before this
// dispatcher takes it: its own dispatcher handles it within a pass or two.
const otherGrace = 5 * time.Second

// passLinger is the least time between two passes that found pending
// events: under load a pass then archives tens of events in the commands
// it would spend on a few, for at most this much added latency per event.
const passLinger = 50 * time.Millisecond

// pass handles one batch of pending events and queues due deliveries
// without blocking (a full queue waits for the next pass). A new event's
// deliveries are queued as soon as they exist. It returns how many pending
// events it found.
func (o *Outbox) pass(ctx context.Context, work chan<- delivery) int {
	var pend []event
	if cur, err := o.pending.Find(ctx, bson.D{}, options.Find().SetLimit(PendingBatch)); err == nil {
		_ = store.All(ctx, cur, &pend)
	} else if ctx.Err() == nil {
		o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Msg("outbox: read pending events")
	}
	// Processes that share the store take the batch in different orders,
	// so they split it rather than redo each other's work.
	rand.Shuffle(len(pend), func(i, j int) { pend[i], pend[j] = pend[j], pend[i] })
	var quiet []event // events no endpoint wants: most of them
	for _, e := range o.mine(pend) {
		if eps, err := o.subscribed(ctx, e.WorkspaceID, e.Type); err == nil && len(eps) == 0 {
			quiet = append(quiet, e)
			continue
		}
		ds, err := o.archive(ctx, e)
		if err != nil && ctx.Err() == nil {
			o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Str("eventId", e.ID).Msg("outbox: schedule event")
		}
		for _, d := range ds {
			o.enqueue(d, work)
		}
	}
	if err := o.archiveQuiet(ctx, quiet); err != nil && ctx.Err() == nil {
		o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Int("events", len(quiet)).Msg("outbox: archive events")
	}

	var due []delivery
	cur, err := o.deliveries.Find(ctx, o.dueFilter(), options.Find().SetLimit(BatchSize))
	if err == nil {
		_ = store.All(ctx, cur, &due)
	} else if ctx.Err() == nil {
		o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Msg("outbox: read due deliveries")
	}
	for _, d := range due {
		if !o.enqueue(d, work) {
			break
		}
	}
	if o.opts.Metrics != nil && o.now().Sub(o.countedAt) >= backlogEvery {
		// Counting reads every pending document on the embedded engine, and
		// a pass runs after every recorded event: so at most every
		// backlogEvery, not at each pass.
		o.countedAt = o.now()
		o.opts.Metrics.WebhookBacklog(countUpTo(ctx, o.pending), countUpTo(ctx, o.deliveries))
	}
	return len(pend)
}

// backlogCap bounds a backlog count: past it the gauge says backlogCap
// ("at least"), and a count never reads more than that many documents.
const backlogCap = 10_000

// countUpTo counts coll's documents up to backlogCap with a find of their
// _ids whose limit the embedded engine pushes down to SQL (an empty
// filter), where a count would read every document.
func countUpTo(ctx context.Context, coll *mongo.Collection) int64 {
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetLimit(backlogCap).SetBatchSize(backlogCap).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var n int64
	for cur.Next(ctx) {
		n++
	}
	return n
}

// backlogEvery is how often a dispatcher counts its backlog for the
// metrics (Prometheus scrapes every 15 s by default).
const backlogEvery = 10 * time.Second

// enqueue hands d to a worker unless this process has it already or its
// workspace or endpoint holds its share of the workers (it stays due and a
// later pass takes it); false when the queue is full.
func (o *Outbox) enqueue(d delivery, work chan<- delivery) bool {
	o.inflightMu.Lock()
	defer o.inflightMu.Unlock()
	if o.inflight[d.ID] {
		return true
	}
	if o.byWorkspace[d.WorkspaceID] >= o.opts.WorkspaceShare || o.byEndpoint[d.EndpointID] >= o.opts.EndpointShare {
		o.skipped = true
		return true
	}
	select {
	case work <- d:
		o.inflight[d.ID] = true
		o.byWorkspace[d.WorkspaceID]++
		o.byEndpoint[d.EndpointID]++
		return true
	default:
		return false
	}
}

// finished gives d's place back to its workspace and endpoint, and wakes
// the dispatcher if a due delivery waited for one.
func (o *Outbox) finished(d delivery) {
	o.inflightMu.Lock()
	delete(o.inflight, d.ID)
	release(o.byWorkspace, d.WorkspaceID)
	release(o.byEndpoint, d.EndpointID)
	wake := o.skipped
	o.skipped = false
	o.inflightMu.Unlock()
	if wake {
		o.Wake()
	}
}

func release(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// dueFilter selects the due deliveries of the workspaces and endpoints that
// have room: so a backlog of one workspace's retries, however long, cannot
// fill the batch and keep another workspace's due deliveries out of it.
func (o *Outbox) dueFilter() bson.D {
	f := bson.D{{Key: "dueAt", Value: bson.D{{Key: "$lte", Value: o.now()}}}}
	o.inflightMu.Lock()
	defer o.inflightMu.Unlock()
	full := func(m map[string]int, share int) bson.A {
		var a bson.A
		for k, n := range m {
			if n >= share {
				a = append(a, k)
			}
		}
		return a
	}
	if a := full(o.byWorkspace, o.opts.WorkspaceShare); len(a) > 0 {
		f = append(f, bson.E{Key: "workspaceId", Value: bson.D{{Key: "$nin", Value: a}}})
	}
	if a := full(o.byEndpoint, o.opts.EndpointShare); len(a) > 0 {
		f = append(f, bson.E{Key: "endpointId", Value: bson.D{{Key: "$nin", Value: a}}})
	}
	return f
}

// archive moves one pending event into the archive, its log and its
// deliveries. Every step is safe to repeat; the pending document goes last.
func (o *Outbox) archive(ctx context.Context, e event) ([]delivery, error) {
	e.ExpiresAt, e.Owner = e.CreatedAt.Add(Retention), ""
	eps, err := o.subscribed(ctx, e.WorkspaceID, e.Type)
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, o.archiveUnsubscribed(ctx, e)
	}
	_, err = o.events.InsertOne(ctx, e)
	if store.IsDuplicateKey(err) {
		var have event
		if err := o.events.FindOne(ctx, store.ByID(e.ID)).Decode(&have); err != nil {
			return nil, fmt.Errorf("read event %s: %w", e.ID, err)
		}
		if have.Scheduled { // a repeat of a fact already handled: no second event
			_, err := o.pending.DeleteOne(ctx, store.ByID(e.ID))
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("archive event %s: %w", e.ID, err)
	}
	if err := o.appendLog(ctx, e); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(eps))
	var ds []delivery
	for _, ep := range eps {
		d, err := o.schedule(ctx, e, ep.ID)
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
		ids = append(ids, ep.ID)
	}
	if _, err := o.events.UpdateOne(ctx, store.ByID(e.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "scheduled", Value: true}, {Key: "endpointIds", Value: ids}}}}); err != nil {
		return ds, fmt.Errorf("mark event %s scheduled: %w", e.ID, err)
	}
	if _, err := o.pending.DeleteOne(ctx, store.ByID(e.ID)); err != nil {
		return ds, fmt.Errorf("delete pending event %s: %w", e.ID, err)
	}
	return ds, nil
}

// archiveUnsubscribed archives an event no endpoint wants, which is most
// of them: with nothing to schedule, the archive is inserted already
// marked scheduled, after the log entry, which saves the separate marking
// write (three writes instead of four, on the embedded engine's single
// writer). A repeat finds the archive marked and only deletes the pending
// document; an archive left unmarked by an older process is marked.
func (o *Outbox) archiveUnsubscribed(ctx context.Context, e event) error {
	var have event
	err := o.events.FindOne(ctx, store.ByID(e.ID)).Decode(&have)
	switch {
	case err == nil && have.Scheduled:
	case err == nil || store.IsNotFound(err):
		if err := o.appendLog(ctx, e); err != nil {
			return err
		}
		e.Scheduled = true
		_, err := o.events.InsertOne(ctx, e)
		if store.IsDuplicateKey(err) {
			_, err = o.events.UpdateOne(ctx, store.ByID(e.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "scheduled", Value: true}}}})
		}
		if err != nil {
			return fmt.Errorf("archive event %s: %w", e.ID, err)
		}
	default:
		return fmt.Errorf("read event %s: %w", e.ID, err)
	}
	if _, err := o.pending.DeleteOne(ctx, store.ByID(e.ID)); err != nil {
		return fmt.Errorf("delete pending event %s: %w", e.ID, err)
	}
	return nil
}

// archiveQuiet archives events no endpoint wants, together: what
// archiveUnsubscribed does for one, in a few commands for all of them —
// the log entries in one insert command, the archives in another, the
// pending documents in one delete (store.Batch: on the embedded engine's
// one writer a command costs far more than a document). The steps keep
// their order, so a crash between them leaves the pending documents, and
// the next pass finds what the last one wrote. The inserts go archiveChunk
// events to a command, so that no one command holds the embedded engine's
// writer long.
func (o *Outbox) archiveQuiet(ctx context.Context, evs []event) error {
	var done []event
	var errs []error
	for chunk := range slices.Chunk(evs, archiveChunk) {
		d, err := o.archiveChunk(ctx, chunk)
		done = append(done, d...)
		errs = append(errs, err)
	}
	errs = append(errs, o.deletePending(ctx, done))
	return errors.Join(errs...)
}

// archiveChunk writes the log entries and archives of evs and returns the
// events whose pending documents may go.
func (o *Outbox) archiveChunk(ctx context.Context, evs []event) (done []event, err error) {
	// Archived already (a repeated fact, a pass that died before its
	// delete)? One read of the chunk's ids (store.FindIDs).
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	var archived []event
	if err := store.FindIDs(ctx, o.events, ids, &archived); err != nil {
		return nil, fmt.Errorf("read %d archived events: %w", len(ids), err)
	}
	have := make(map[string]event, len(archived))
	for _, h := range archived {
		have[h.ID] = h
	}
	var fresh []event
	for _, e := range evs {
		h, ok := have[e.ID]
		switch {
		case !ok:
			fresh = append(fresh, e)
		case h.Scheduled:
			done = append(done, e)
		default: // an archive an older process left unmarked
			if err := o.archiveUnsubscribed(ctx, e); err != nil {
				return done, err
			}
		}
	}
	written, logErr := o.appendLogs(ctx, fresh)
	if len(written) > 0 {
		docs := make([]any, len(written))
		for i, e := range written {
			e.Scheduled, e.ExpiresAt, e.Owner = true, e.CreatedAt.Add(Retention), ""
			docs[i] = e
		}
		errs, err := o.eventsBatch.Insert(ctx, docs...)
		if err != nil {
			return done, errors.Join(logErr, fmt.Errorf("archive %d events: %w", len(written), err))
		}
		for i, e := range written {
			switch {
			case errs[i] == nil:
			case store.IsDuplicateKey(errs[i]):
				// Archived meanwhile by another process. Its pending
				// document goes only if that archive is complete: one that
				// is not is another dispatcher's work in progress (it
				// deletes the pending document when done), or a crash's,
				// which the next pass finishes (archive).
				var h event
				if err := o.events.FindOne(ctx, store.ByID(e.ID)).Decode(&h); err != nil || !h.Scheduled {
					continue
				}
			default:
				continue // stays pending
			}
			done = append(done, e)
		}
	}
	return done, logErr
}

// deletePending deletes handled events from outbox_pending: one command by
// {_id: {$in}}, which both engines serve by the _id index (on the embedded
// engine, third_party/ferretdb/PATCHES.md, patch 5; a pass handles at most
// PendingBatch events, below its 1,000 ids).
func (o *Outbox) deletePending(ctx context.Context, evs []event) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]any, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	if _, err := o.pending.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}); err != nil {
		return fmt.Errorf("delete %d pending events: %w", len(ids), err)
	}
	return nil
}

// schedule creates the automatic delivery of e to an endpoint, due now. A
// duplicate key means it exists already (then the existing one is queued;
// its attempt claim sorts out who sends).
func (o *Outbox) schedule(ctx context.Context, e event, endpointID string) (delivery, error) {
	d := delivery{ID: DeliveryID(e.ID, endpointID, 0), EventID: e.ID, EndpointID: endpointID, WorkspaceID: e.WorkspaceID, Attempt: 1, DueAt: o.now()}
	if _, err := o.deliveries.InsertOne(ctx, d); err != nil && !store.IsDuplicateKey(err) {
		return delivery{}, fmt.Errorf("schedule delivery %s: %w", d.ID, err)
	}
	return d, nil
}

// attempt runs the next attempt of d, if this process wins its claim.
func (o *Outbox) attempt(ctx context.Context, d delivery) {
	log := o.log.With().Str("eventId", d.EventID).Str("endpointId", d.EndpointID).Str("workspaceId", d.WorkspaceID).Int("attempt", d.Attempt).Logger()
	now := o.now()
	claim := attempt{ID: attemptID(d.ID, d.Attempt), DeliveryID: d.ID, N: d.Attempt, StartedAt: now,
		LeaseUntil: now.Add(2 * o.opts.Timeout), ExpiresAt: now.Add(Retention)}
	if _, err := o.attempts.InsertOne(ctx, claim); err != nil {
		if !store.IsDuplicateKey(err) {
			log.Warn().Err(err).Str("event", events.WebhookStoreError).Msg("outbox: claim attempt")
			return
		}
		o.claimedElsewhere(ctx, d)
		return
	}

	var e event
	err := o.events.FindOne(ctx, store.ByID(d.EventID)).Decode(&e)
	ep, eperr := o.getEndpoint(ctx, "", d.EndpointID)
	switch {
	case store.IsNotFound(err), msgapi.ErrorCode(eperr) == msgapi.CodeNotFound, eperr == nil && ep.DisabledAt != nil:
		// The event expired or the endpoint is gone or disabled: nothing to send.
		o.finish(ctx, d, result{ID: resultID(d.ID, d.Attempt), Error: "endpoint deleted or disabled", At: now, ExpiresAt: now.Add(Retention)})
		return
	case err != nil || eperr != nil:
		log.Warn().Err(errors.Join(err, eperr)).Str("event", events.WebhookStoreError).Msg("outbox: read event or endpoint")
		return // the claim lapses after its lease; the next pass claims the next attempt
	}

	res, retryAfter, slow := o.post(ctx, ep, e, d.Attempt)
	res.ID, res.ExpiresAt = resultID(d.ID, d.Attempt), res.At.Add(Retention)
	gone := res.StatusCode == http.StatusGone
	if !res.Success && !gone && d.Attempt < len(o.opts.Schedule) {
		next := res.At.Add(o.delay(d.Attempt, retryAfter, slow))
		res.NextAt = &next
	}
	outcome := "failed"
	if res.Success {
		outcome = "succeeded"
	}
	if o.opts.Metrics != nil {
		o.opts.Metrics.WebhookAttempt(outcome, time.Duration(res.LatencyMs)*time.Millisecond)
	}
	ev := log.Info()
	if !res.Success {
		ev = log.Warn()
	}
	ev = ev.Str("event", events.WebhookAttempt).Str("outcome", outcome).Int("statusCode", res.StatusCode).Int64("latencyMs", res.LatencyMs).Str("error", res.Error)
	if res.NextAt != nil {
		ev = ev.Time("nextAttemptAt", *res.NextAt)
	}
	ev.Msg("webhook attempt")

	if _, err := o.results.InsertOne(ctx, res); err != nil && !store.IsDuplicateKey(err) {
		log.Warn().Err(err).Str("event", events.WebhookStoreError).Msg("outbox: record attempt result")
		return
	}
	switch {
	case gone:
		o.disable(ctx, ep, "the endpoint answered 410 Gone")
	case res.Success && ep.FailingSince != nil:
		_, _ = o.endpoints.UpdateOne(ctx, store.ByID(ep.ID), bson.D{{Key: "$unset", Value: bson.D{{Key: "failingSince", Value: ""}}}})
		o.epCache.forget(ep.WorkspaceID)
	case !res.Success && ep.FailingSince == nil:
		_, _ = o.endpoints.UpdateOne(ctx, store.ByID(ep.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "failingSince", Value: res.At}}}})
		o.epCache.forget(ep.WorkspaceID)
	case !res.Success && res.NextAt == nil && res.At.Sub(*ep.FailingSince) >= o.opts.DisableAfter:
		o.disable(ctx, ep, fmt.Sprintf("no successful delivery since %s and the retries of an event ran out", ep.FailingSince.Format(time.RFC3339)))
	}
	o.finish(ctx, d, res)
}

// finish moves d on after attempt d.Attempt ended with res: to the next
// attempt, or out of the backlog.
func (o *Outbox) finish(ctx context.Context, d delivery, res result) {
	if res.NextAt == nil {
		_, _ = o.deliveries.DeleteOne(ctx, store.ByID(d.ID))
		return
	}
	_, _ = o.deliveries.UpdateOne(ctx, store.ByID(d.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "attempt", Value: d.Attempt + 1}, {Key: "dueAt", Value: *res.NextAt}}}})
}

// claimedElsewhere handles a lost claim: the attempt's result moves the
// delivery on; a claim without a result past its lease is abandoned (its
// claimer died) and the next attempt becomes due.
func (o *Outbox) claimedElsewhere(ctx context.Context, d delivery) {
	var res result
	err := o.results.FindOne(ctx, store.ByID(resultID(d.ID, d.Attempt))).Decode(&res)
	if err == nil {
		o.finish(ctx, d, res)
		return
	}
	if !store.IsNotFound(err) {
		return
	}
	var a attempt
	if err := o.attempts.FindOne(ctx, store.ByID(attemptID(d.ID, d.Attempt))).Decode(&a); err != nil {
		return
	}
	next := a.LeaseUntil
	if !o.now().Before(a.LeaseUntil) {
		if d.Attempt >= len(o.opts.Schedule) {
			_, _ = o.deliveries.DeleteOne(ctx, store.ByID(d.ID))
			return
		}
		o.finish(ctx, d, result{NextAt: &next})
		return
	}
	_, _ = o.deliveries.UpdateOne(ctx, store.ByID(d.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "dueAt", Value: next}}}})
}

// post sends one attempt. Only 2xx is success; redirects are not followed.
func (o *Outbox) post(ctx context.Context, ep Endpoint, e event, n int) (res result, retryAfter time.Duration, slow bool) {
	start := time.Now()
	res.At = o.now()
	secret, _, err := o.opts.Keyring.Open(ep.Secret, endpointAAD(ep.WorkspaceID, ep.ID))
	if err != nil {
		o.log.Error().Err(err).Str("event", events.WebhookStoreError).Str("endpointId", ep.ID).Msg("outbox: endpoint secret cannot be decrypted")
		res.Error = "endpoint secret cannot be decrypted"
		return res, 0, false
	}
	key, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		res.Error = "endpoint secret unusable"
		return res, 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, o.opts.Timeout)
	defer cancel()
	body := []byte(e.Payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		res.Error = "invalid endpoint URL"
		return res, 0, false
	}
	ts := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	stdwebhook.SetHeaders(req.Header, key, e.ID, ts, body)
	resp, err := o.client.Do(req)
	res.LatencyMs = time.Since(start).Milliseconds()
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a token
		}
		// The workspace sees the class only: the detail (addresses, ports,
		// resolver answers) would map msgapi's network for it.
		res.Error = egress.Classify(err)
		o.log.Warn().Err(err).Str("event", events.WebhookAttempt).Str("endpointId", ep.ID).Str("workspaceId", ep.WorkspaceID).
			Str("class", res.Error).Msg("webhook attempt: no answer")
		return res, 0, res.Error == egress.KindTimeout || ctx.Err() != nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	res.LatencyMs = time.Since(start).Milliseconds()
	res.StatusCode = resp.StatusCode
	res.Body = truncate(string(b), maxResponseBody)
	res.Success = resp.StatusCode >= 200 && resp.StatusCode < 300
	if !res.Success {
		res.Error = "status " + strconv.Itoa(resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			res.Error += " (redirects are not followed)"
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res, retryAfter, resp.StatusCode == http.StatusTooManyRequests
}

// delay is the wait before attempt n+1: the schedule's entry with ±Jitter,
// at least SlowRetry after a timeout or a 429, and at least a Retry-After
// clamped to MaxRetryAfter.
func (o *Outbox) delay(n int, retryAfter time.Duration, slow bool) time.Duration {
	d := o.opts.Schedule[n]
	if j := o.opts.Jitter; j > 0 && d > 0 {
		d = time.Duration(float64(d) * (1 - j + 2*j*rand.Float64()))
	}
	if slow {
		d = max(d, o.opts.SlowRetry)
	}
	return max(d, min(retryAfter, o.opts.MaxRetryAfter))
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// disable turns an endpoint off, logs it and tells the workspace with a
// webhook_endpoint.disabled event (to its other endpoints).
func (o *Outbox) disable(ctx context.Context, ep Endpoint, reason string) {
	now := o.now()
	_, err := o.endpoints.UpdateOne(ctx, store.ByID(ep.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "disabledAt", Value: now}, {Key: "disabledReason", Value: reason}}}})
	if err != nil {
		o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Str("endpointId", ep.ID).Msg("outbox: disable endpoint")
		return
	}
	o.epCache.forget(ep.WorkspaceID)
	o.log.Warn().Str("event", events.WebhookEndpointDisabled).Str("workspaceId", ep.WorkspaceID).Str("endpointId", ep.ID).
		Str("reason", reason).Msg("webhook endpoint disabled")
	ep.Secret, ep.DisabledAt, ep.DisabledReason = "", &now, reason
	if _, err := o.Record(ctx, Fact{WorkspaceID: ep.WorkspaceID, Type: TypeEndpointDisabled, SubjectID: ep.ID + "@" + now.Format(time.RFC3339Nano), Data: map[string]any{"endpoint": EndpointView(ep)}}); err != nil {
		o.log.Warn().Err(err).Str("event", events.WebhookStoreError).Str("endpointId", ep.ID).Msg("outbox: record endpoint disabled event")
	}
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
