package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

func upsert() options.Lister[options.UpdateOneOptions] { return options.UpdateOne().SetUpsert(true) }

// EndpointJSON is an endpoint's API shape. Secret is present only in the
// answer to its creation.
type EndpointJSON struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Description    *string    `json:"description"`
	EventTypes     []string   `json:"eventTypes"`
	Status         string     `json:"status"` // enabled | disabled
	DisabledReason *string    `json:"disabledReason"`
	DisabledAt     *time.Time `json:"disabledAt"`
	CreatedAt      time.Time  `json:"createdAt"`
	Secret         string     `json:"secret,omitempty"`
}

// EndpointView is the API shape of ep (with its secret only if ep has one).
func EndpointView(ep Endpoint) EndpointJSON {
	v := EndpointJSON{ID: ep.ID, URL: ep.URL, EventTypes: ep.EventTypes, Status: "enabled", CreatedAt: ep.CreatedAt, Secret: ep.Secret, DisabledAt: ep.DisabledAt}
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	if ep.Description != "" {
		v.Description = &ep.Description
	}
	if ep.DisabledAt != nil {
		v.Status, v.DisabledReason = "disabled", &ep.DisabledReason
	}
	return v
}

// EventView is an event as the API shows it: its delivered payload, and
// its attempts when read one by one.
type EventView struct {
	ID        string
	Type      string
	CreatedAt time.Time
	Payload   string
	Attempts  []AttemptView
	// AttemptsTruncated: the event has more attempts than MaxAttemptsShown.
	AttemptsTruncated bool
}

// MarshalJSON is the payload's fields (id, type, createdAt, workspaceId,
// data) plus attempts when they were read.
func (e EventView) MarshalJSON() ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.Payload), &m); err != nil {
		return nil, fmt.Errorf("event %s payload: %w", e.ID, err)
	}
	if e.Attempts != nil {
		b, err := json.Marshal(e.Attempts)
		if err != nil {
			return nil, err
		}
		m["attempts"] = b
		m["attemptsTruncated"] = json.RawMessage(strconv.FormatBool(e.AttemptsTruncated))
	}
	return json.Marshal(m)
}

// AttemptView is one delivery attempt of an event to an endpoint.
type AttemptView struct {
	EndpointID    string     `json:"endpointId"`
	Attempt       int        `json:"attempt"`
	Manual        bool       `json:"manual"`
	StartedAt     time.Time  `json:"startedAt"`
	Status        string     `json:"status"` // succeeded | failed | in_flight
	StatusCode    *int       `json:"statusCode"`
	LatencyMs     *int64     `json:"latencyMs"`
	Error         *string    `json:"error"`
	ResponseBody  *string    `json:"responseBody"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
}

// MaxRedeliveries bounds the manual redelivery rounds of one event to one
// endpoint; MaxAttemptsShown bounds the attempts GetEvent reads and shows.
// Together with the endpoint limit they bound what one event can cost to
// read, however often its workspace asks for it.
const (
	MaxRedeliveries  = 10
	MaxAttemptsShown = 100
)

// GetEvent reads a workspace's event with its attempts: at most
// MaxAttemptsShown of them (AttemptsTruncated says there are more), over
// at most MaxRedeliveries+1 rounds per endpoint.
func (o *Outbox) GetEvent(ctx context.Context, ws, id string) (EventView, error) {
	e, err := o.readEvent(ctx, ws, id)
	if err != nil {
		return EventView{}, err
	}
	v := EventView{ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt, Payload: e.Payload, Attempts: []AttemptView{}}
	eps := e.EndpointIDs
	if len(eps) > 2*MaxEndpoints { // endpoints deleted and replaced: the first ones
		eps, v.AttemptsTruncated = eps[:2*MaxEndpoints], true
	}
read:
	for _, ep := range eps {
		for round := 0; round <= MaxRedeliveries; round++ {
			left := MaxAttemptsShown - len(v.Attempts)
			if left <= 0 {
				v.AttemptsTruncated = true
				break read
			}
			atts, more, err := o.readAttempts(ctx, DeliveryID(e.ID, ep, round), ep, round > 0, left)
			if err != nil {
				return EventView{}, err
			}
			v.Attempts = append(v.Attempts, atts...)
			v.AttemptsTruncated = v.AttemptsTruncated || more
			if len(atts) == 0 && round > 0 {
				break
			}
		}
	}
	slices.SortStableFunc(v.Attempts, func(a, b AttemptView) int { return a.StartedAt.Compare(b.StartedAt) })
	return v, nil
}

// readEvent finds an event in the archive, else among the pending ones
// (recorded a moment ago, not yet dispatched).
func (o *Outbox) readEvent(ctx context.Context, ws, id string) (event, error) {
	var e event
	err := o.events.FindOne(ctx, store.ByID(id)).Decode(&e)
	if store.IsNotFound(err) {
		err = o.pending.FindOne(ctx, store.ByID(id)).Decode(&e)
	}
	switch {
	case store.IsNotFound(err), err == nil && e.WorkspaceID != ws:
		return event{}, msgapi.Errorf(msgapi.CodeNotFound, "event %q does not exist in this workspace", id)
	case err != nil:
		return event{}, msgapi.Unavailable(fmt.Errorf("read event %s: %w", id, err))
	}
	return e, nil
}

// readAttempts reads attempts 1, 2, ... of one delivery until one is
// missing (each a lookup by _id), at most limit of them; more reports that
// the limit cut it short.
func (o *Outbox) readAttempts(ctx context.Context, deliveryID, endpointID string, manual bool, limit int) (out []AttemptView, more bool, err error) {
	for n := 1; ; n++ {
		if n > limit {
			return out, true, nil
		}
		var a attempt
		err := o.attempts.FindOne(ctx, store.ByID(attemptID(deliveryID, n))).Decode(&a)
		if store.IsNotFound(err) {
			return out, false, nil
		}
		if err != nil {
			return nil, false, msgapi.Unavailable(fmt.Errorf("read attempt: %w", err))
		}
		v := AttemptView{EndpointID: endpointID, Attempt: n, Manual: manual, StartedAt: a.StartedAt, Status: "in_flight"}
		var r result
		err = o.results.FindOne(ctx, store.ByID(resultID(deliveryID, n))).Decode(&r)
		switch {
		case err == nil:
			v.Status = "failed"
			if r.Success {
				v.Status = "succeeded"
			}
			if r.StatusCode != 0 {
				v.StatusCode = &r.StatusCode
			}
			v.LatencyMs = &r.LatencyMs
			if r.Error != "" {
				v.Error = &r.Error
			}
			if r.StatusCode != 0 {
				v.ResponseBody = &r.Body
			}
			v.NextAttemptAt = r.NextAt
		case !store.IsNotFound(err):
			return nil, false, msgapi.Unavailable(fmt.Errorf("read attempt result: %w", err))
		}
		out = append(out, v)
	}
}

// Redeliver schedules a new round of delivery of an event to every enabled
// endpoint of its workspace that wants its type, with the same webhook-id.
// It returns the endpoints it scheduled.
func (o *Outbox) Redeliver(ctx context.Context, ws, id string) ([]string, error) {
	e, err := o.readEvent(ctx, ws, id)
	if err != nil {
		return nil, err
	}
	eps, err := o.listEndpoints(ctx, ws)
	if err != nil {
		return nil, err
	}
	scheduled := []string{}
	for _, ep := range eps {
		if !ep.wants(e.Type) {
			continue
		}
		if err := o.redeliverTo(ctx, e, ep.ID); err != nil {
			return nil, err
		}
		scheduled = append(scheduled, ep.ID)
	}
	if len(scheduled) > 0 {
		if _, err := o.events.UpdateOne(ctx, store.ByID(e.ID), bson.D{{Key: "$addToSet", Value: bson.D{{Key: "endpointIds", Value: bson.D{{Key: "$each", Value: scheduled}}}}}}); err != nil {
			return nil, msgapi.Unavailable(fmt.Errorf("note redelivery of %s: %w", e.ID, err))
		}
		o.Wake()
	}
	return scheduled, nil
}

// redeliverTo creates the first unused manual round: one whose delivery
// neither exists nor has made an attempt. Concurrent calls race on the
// delivery insert, and the loser takes the next round.
func (o *Outbox) redeliverTo(ctx context.Context, e event, endpointID string) error {
	for round := 1; round <= MaxRedeliveries; round++ {
		id := DeliveryID(e.ID, endpointID, round)
		err := o.attempts.FindOne(ctx, store.ByID(attemptID(id, 1))).Err()
		if err == nil {
			continue
		}
		if !store.IsNotFound(err) {
			return msgapi.Unavailable(fmt.Errorf("read attempt: %w", err))
		}
		d := delivery{ID: id, EventID: e.ID, EndpointID: endpointID, WorkspaceID: e.WorkspaceID, Attempt: 1, DueAt: o.now(), Manual: true}
		_, err = o.deliveries.InsertOne(ctx, d)
		if err == nil {
			return nil
		}
		if !store.IsDuplicateKey(err) {
			return msgapi.Unavailable(fmt.Errorf("schedule redelivery: %w", err))
		}
	}
	return msgapi.Errorf(msgapi.CodeInvalid, "this event has been redelivered %d times, the most allowed", MaxRedeliveries)
}
