package notify

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/store"
)

// MaxEndpoints bounds the endpoints of one workspace. Endpoints are read by
// workspace (a scan of webhook_endpoints on the embedded engine, cached for
// a few seconds by the dispatcher): a small, bounded collection.
const MaxEndpoints = 20

// Endpoint is one URL a workspace receives events at.
type Endpoint struct {
	ID          string   `bson:"_id"`
	WorkspaceID string   `bson:"workspaceId"`
	URL         string   `bson:"url"`
	Description string   `bson:"description,omitempty"`
	EventTypes  []string `bson:"eventTypes"` // empty: every type
	// Secret signs deliveries. Returned once, by Create; never logged.
	Secret         string     `bson:"secret"`
	CreatedAt      time.Time  `bson:"createdAt"`
	DisabledAt     *time.Time `bson:"disabledAt,omitempty"`
	DisabledReason string     `bson:"disabledReason,omitempty"`
	// FailingSince is the first failure after the last success (a hint
	// written by the dispatcher, not a decision).
	FailingSince *time.Time `bson:"failingSince,omitempty"`
	// Slot is the endpoint's place among its workspace's MaxEndpoints.
	Slot int `bson:"slot,omitempty"`
}

// slot is one of a workspace's MaxEndpoints places, held by an endpoint.
type slot struct {
	ID         string    `bson:"_id"`
	EndpointID string    `bson:"endpointId"`
	TakenAt    time.Time `bson:"takenAt"`
}

func slotID(workspaceID string, n int) string { return workspaceID + "/" + strconv.Itoa(n) }

// slotGrace is how long a slot whose endpoint does not exist is left to
// the create that took it (it inserts the endpoint next); past it the slot
// was left by a create that died, and is taken back.
const slotGrace = time.Minute

// takeSlot inserts the first free slot of the workspace for endpointID.
// Endpoints created before slots existed count too: a workspace that has
// MaxEndpoints of them gets no slot.
func (o *Outbox) takeSlot(ctx context.Context, workspaceID, endpointID string) (int, error) {
	have, err := o.listEndpoints(ctx, workspaceID)
	if err != nil {
		return 0, err
	}
	full := &msgapi.Error{Code: msgapi.CodeInvalid, Message: fmt.Sprintf("a workspace has at most %d webhook endpoints; delete one first", MaxEndpoints)}
	if len(have) >= MaxEndpoints {
		return 0, full
	}
	for n := 1; n <= MaxEndpoints; n++ {
		s := slot{ID: slotID(workspaceID, n), EndpointID: endpointID, TakenAt: o.now()}
		_, err := o.slots.InsertOne(ctx, s)
		if err == nil {
			return n, nil
		}
		if !store.IsDuplicateKey(err) {
			return 0, msgapi.Unavailable(fmt.Errorf("take webhook endpoint slot: %w", err))
		}
		if o.reclaimSlot(ctx, s) {
			return n, nil
		}
	}
	return 0, full
}

// reclaimSlot takes back a slot whose endpoint is gone (a create or a
// delete that died half-way): delete it by its holder, then insert it
// again; of two reclaimers only one insert wins.
func (o *Outbox) reclaimSlot(ctx context.Context, s slot) bool {
	var held slot
	if err := o.slots.FindOne(ctx, store.ByID(s.ID)).Decode(&held); err != nil || o.now().Sub(held.TakenAt) < slotGrace {
		return false
	}
	if err := o.endpoints.FindOne(ctx, store.ByID(held.EndpointID)).Err(); !store.IsNotFound(err) {
		return false
	}
	if _, err := o.slots.DeleteOne(ctx, bson.D{{Key: "_id", Value: s.ID}, {Key: "endpointId", Value: held.EndpointID}}); err != nil {
		return false
	}
	_, err := o.slots.InsertOne(ctx, s)
	return err == nil
}

// wants reports whether the endpoint is enabled and subscribed to typ.
func (e Endpoint) wants(typ string) bool {
	return e.DisabledAt == nil && (len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, typ))
}

// EndpointInput is what a workspace sends to create an endpoint.
type EndpointInput struct {
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"eventTypes"`
}

// CreateEndpoint validates in and stores a new endpoint with a fresh
// secret; the returned Endpoint is the only time the secret is shown.
func (o *Outbox) CreateEndpoint(ctx context.Context, workspaceID string, in EndpointInput) (Endpoint, error) {
	var fields []msgapi.FieldError
	if msg := o.checkURL(in.URL); msg != "" {
		fields = append(fields, msgapi.FieldError{Field: "url", Message: msg})
	}
	if len(in.Description) > 500 {
		fields = append(fields, msgapi.FieldError{Field: "description", Message: "at most 500 bytes"})
	}
	types := []string{}
	for i, t := range in.EventTypes {
		if !knownType(t) {
			fields = append(fields, msgapi.FieldError{Field: fmt.Sprintf("eventTypes[%d]", i), Message: "unknown event type; one of " + strings.Join(Types, ", ")})
			continue
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if len(fields) > 0 {
		return Endpoint{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the webhook endpoint is invalid", Fields: fields}
	}
	ep := Endpoint{
		ID: msgapi.NewID("we"), WorkspaceID: workspaceID, URL: in.URL, Description: in.Description,
		EventTypes: types, Secret: stdwebhook.NewSecret(), CreatedAt: o.now(),
	}
	stored := ep
	var err error
	if stored.Secret, err = o.opts.Keyring.Seal(ep.Secret, endpointAAD(workspaceID, ep.ID)); err != nil {
		return Endpoint{}, fmt.Errorf("seal webhook endpoint secret: %w", err)
	}
	// The limit is decided by inserts: an endpoint first takes one of the
	// workspace's MaxEndpoints slots (a unique _id), so concurrent creates
	// cannot all pass a count that none of them has written yet.
	slot, err := o.takeSlot(ctx, workspaceID, ep.ID)
	if err != nil {
		return Endpoint{}, err
	}
	stored.Slot = slot
	if _, err := o.endpoints.InsertOne(ctx, stored); err != nil {
		_, _ = o.slots.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: slotID(workspaceID, slot)}, {Key: "endpointId", Value: ep.ID}})
		return Endpoint{}, msgapi.Unavailable(fmt.Errorf("insert webhook endpoint: %w", err))
	}
	o.epCache.forget(workspaceID)
	return ep, nil
}

// checkURL returns why raw is not an acceptable endpoint URL, or "". The
// host is judged as the dialler will judge it (an address literal or a
// localhost name msgapi never connects to is refused now); a name is
// judged at every connection.
func (o *Outbox) checkURL(raw string) string {
	if raw == "" {
		return "required"
	}
	if len(raw) > 2048 {
		return "at most 2048 bytes"
	}
	for i := 0; i < len(raw); i++ {
		// JSON decoding turns invalid UTF-8 into U+FFFD: any byte outside
		// printable ASCII is refused, not repaired.
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return "printable ASCII only: percent-encode the path, punycode an international host name"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "an absolute URL without credentials or fragment"
	}
	if r := o.opts.Egress.CheckHost(u.Hostname()); r != "" {
		return "the host is a " + r + " address: msgapi delivers only to public addresses (README: Security)"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if o.opts.AllowHTTP || (o.opts.Egress.AllowsLoopback() && isLoopback(u.Hostname())) {
			return ""
		}
	}
	return "must be https"
}

func isLoopback(host string) bool {
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// ListEndpoints returns a workspace's endpoints, oldest first, secrets
// blanked.
func (o *Outbox) ListEndpoints(ctx context.Context, workspaceID string) ([]Endpoint, error) {
	eps, err := o.listEndpoints(ctx, workspaceID)
	for i := range eps {
		eps[i].Secret = ""
	}
	return eps, err
}

func (o *Outbox) listEndpoints(ctx context.Context, workspaceID string) ([]Endpoint, error) {
	cur, err := o.endpoints.Find(ctx, bson.D{{Key: "workspaceId", Value: workspaceID}})
	if err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("list webhook endpoints: %w", err))
	}
	var eps []Endpoint
	if err := cur.All(ctx, &eps); err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("list webhook endpoints: %w", err))
	}
	slices.SortFunc(eps, func(a, b Endpoint) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return eps, nil
}

// DeleteEndpoint removes a workspace's endpoint; its pending deliveries are
// dropped when they come due.
func (o *Outbox) DeleteEndpoint(ctx context.Context, workspaceID, id string) error {
	ep, err := o.getEndpoint(ctx, workspaceID, id)
	if err != nil {
		return err
	}
	if _, err := o.endpoints.DeleteOne(ctx, store.ByID(id)); err != nil {
		return msgapi.Unavailable(fmt.Errorf("delete webhook endpoint %s: %w", id, err))
	}
	if ep.Slot > 0 { // a slot left behind is reclaimed by a later create
		_, _ = o.slots.DeleteOne(ctx, bson.D{{Key: "_id", Value: slotID(workspaceID, ep.Slot)}, {Key: "endpointId", Value: id}})
	}
	o.epCache.forget(workspaceID)
	return nil
}

// getEndpoint reads an endpoint by id; another workspace's is not found.
func (o *Outbox) getEndpoint(ctx context.Context, workspaceID, id string) (Endpoint, error) {
	var ep Endpoint
	err := o.endpoints.FindOne(ctx, store.ByID(id)).Decode(&ep)
	switch {
	case store.IsNotFound(err), err == nil && workspaceID != "" && ep.WorkspaceID != workspaceID:
		return Endpoint{}, msgapi.Errorf(msgapi.CodeNotFound, "webhook endpoint %q does not exist in this workspace", id)
	case err != nil:
		return Endpoint{}, msgapi.Unavailable(fmt.Errorf("read webhook endpoint %s: %w", id, err))
	}
	return ep, nil
}

// subscribed returns the workspace's enabled endpoints that want typ,
// from a short-lived cache.
func (o *Outbox) subscribed(ctx context.Context, workspaceID, typ string) ([]Endpoint, error) {
	eps, ok := o.epCache.get(workspaceID, o.now())
	if !ok {
		var err error
		if eps, err = o.listEndpoints(ctx, workspaceID); err != nil {
			return nil, err
		}
		o.epCache.put(workspaceID, eps, o.now())
	}
	var out []Endpoint
	for _, e := range eps {
		if e.wants(typ) {
			out = append(out, e)
		}
	}
	return out, nil
}

// endpointCache holds each workspace's endpoints for a few seconds, so a
// burst of events costs one endpoint read. Bounded: cleared when full.
type endpointCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedEndpoints
}

type cachedEndpoints struct {
	eps     []Endpoint
	expires time.Time
}

func newEndpointCache(ttl time.Duration) *endpointCache {
	return &endpointCache{ttl: ttl, m: map[string]cachedEndpoints{}}
}

func (c *endpointCache) get(ws string, now time.Time) ([]Endpoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[ws]
	return e.eps, ok && now.Before(e.expires)
}

func (c *endpointCache) put(ws string, eps []Endpoint, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 10000 {
		clear(c.m)
	}
	c.m[ws] = cachedEndpoints{eps: eps, expires: now.Add(c.ttl)}
}

func (c *endpointCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

func (c *endpointCache) forget(ws string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, ws)
}
