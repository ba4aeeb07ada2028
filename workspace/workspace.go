// Package workspace owns workspaces (customer accounts), their settings and
// their API keys, and decides which key is worth which workspace, and for
// how long a process may believe it.
//
// A key is 32 random bytes shown once, at creation. Only its SHA-256 is
// stored, as the _id of its api_keys document, so authentication is one read
// by _id and a leaked database holds no usable key. Plain SHA-256 (not a slow
// password hash) is right here because the key has 256 bits of entropy:
// there is nothing to brute-force.
//
// Each process caches key → workspace (with the workspace's settings) for at
// most the cache TTL, so a revoked key, a disabled workspace or a changed
// setting takes effect in every process within that bound; keys in use are
// re-read in the background before they expire, so in steady state the
// request path costs no round trip. Unknown keys and unknown webhook
// workspace ids are remembered for a while in bounded negative caches, so a
// flood of made-up credentials costs the store one read per distinct value.
package workspace

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
)

// Collections used by this package.
var Collections = []store.Collection{{Name: "workspaces"}, {Name: "api_keys"}}

// Workspace is one customer account.
type Workspace struct {
	ID        string    `bson:"_id"`
	Name      string    `bson:"name"`
	CreatedAt time.Time `bson:"createdAt"`
	// Disabled workspaces are refused everywhere: their API keys
	// authenticate nothing and their webhooks are not recorded.
	Disabled bool `bson:"disabled,omitempty"`
	// Settings override server settings for this workspace; read them
	// through DedupWindow, DedupWait, DefaultRegion and RateLimit.
	Settings Settings `bson:"settings,omitempty"`
	// Secrets holds per-channel inbound webhook secrets (slack, twilio,
	// telegram, email) as stored: sealed when a keyring is configured, so
	// read them with Store.Secret. Never returned by the API.
	Secrets map[string]string `bson:"secrets,omitempty" json:"-"`
	// TestKey: the request authenticated with a test key (never stored).
	TestKey bool `bson:"-" json:"-"`
}

// Options configure New.
type Options struct {
	Store *store.Store
	// CacheTTL bounds how long a process trusts what it read about a key:
	// a revoked key, a disabled workspace or a changed setting takes effect
	// within it. 0 disables the cache (every request reads the store).
	CacheTTL time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Store reads and writes workspaces and keys.
type Store struct {
	workspaces *mongo.Collection
	keys       *mongo.Collection
	cacheTTL   time.Duration
	now        func() time.Time
	keyring    *secrets.Keyring // seals channel secrets; nil stores them in clear (secrets.go)

	mu    sync.Mutex
	cache map[string]*cached // key hash → what the key is worth
	// group collapses concurrent lookups of one key into one read, so a
	// burst on a cold cache costs the store one lookup, not one per request.
	group        singleflight.Group
	unknownKeys  *negative // key hashes the store does not know
	unknownSpace *negative // workspace ids the store does not know (webhooks)
	bg           sync.WaitGroup

	// beforeLookup, when set (tests), runs at the start of every store
	// lookup of a key, with the lookup's context.
	beforeLookup func(ctx context.Context)
}

// New returns a Store.
func New(o Options) *Store {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		workspaces:   o.Store.Collection("workspaces"),
		keys:         o.Store.Collection("api_keys"),
		cacheTTL:     o.CacheTTL,
		now:          now,
		cache:        map[string]*cached{},
		unknownKeys:  newNegative(NegativeTTL, NegativeSize),
		unknownSpace: newNegative(NegativeTTL, NegativeSize),
	}
}

// NewStore returns a Store with the given key cache TTL (0 disables it).
func NewStore(s *store.Store, cacheTTL time.Duration) *Store {
	return New(Options{Store: s, CacheTTL: cacheTTL})
}

// Wait returns once the background work started so far (key refreshes and
// lastUsedAt writes) has finished: for shutdown and for tests that count
// round trips.
func (s *Store) Wait() { s.bg.Wait() }

// Create makes a workspace and its first API key, returned once.
func (s *Store) Create(ctx context.Context, name string) (Workspace, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return Workspace{}, "", &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the workspace name is invalid",
			Fields: []msgapi.FieldError{{Field: "name", Message: "required, at most 200 bytes of UTF-8 text without control characters"}}}
	}
	ws := Workspace{ID: msgapi.NewID("ws"), Name: name, CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	if _, err := s.workspaces.InsertOne(ctx, ws); err != nil {
		return Workspace{}, "", msgapi.Unavailable(fmt.Errorf("insert workspace: %w", err))
	}
	key, err := s.addKey(ctx, ws.ID, false)
	if err != nil {
		return Workspace{}, "", err
	}
	return ws, key, nil
}

// Get reads a workspace by id (no cache: the admin API's view).
func (s *Store) Get(ctx context.Context, id string) (Workspace, error) {
	var ws Workspace
	err := s.workspaces.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&ws)
	switch {
	case store.IsNotFound(err):
		return Workspace{}, errNoWorkspace(id)
	case err != nil:
		return Workspace{}, msgapi.Unavailable(fmt.Errorf("read workspace %s: %w", id, err))
	}
	return ws, nil
}

// Find is Get for unauthenticated callers (inbound webhooks): an id that is
// not shaped like a workspace id, or that the store did not know a moment
// ago, is CodeNotFound without a round trip.
func (s *Store) Find(ctx context.Context, id string) (Workspace, error) {
	if !ValidID(id) || s.unknownSpace.has(id, s.now()) {
		return Workspace{}, errNoWorkspace("")
	}
	ws, err := s.Get(ctx, id)
	if msgapi.ErrorCode(err) == msgapi.CodeNotFound {
		s.unknownSpace.add(id, s.now())
	}
	return ws, err
}

// ValidID reports whether id has the shape of a workspace id: "ws_" and 26
// lower-case base32 characters (msgapi.NewID).
func ValidID(id string) bool {
	if len(id) != 29 || !strings.HasPrefix(id, "ws_") {
		return false
	}
	for _, c := range id[3:] {
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

func errNoWorkspace(id string) error {
	if id == "" {
		return msgapi.Errorf(msgapi.CodeNotFound, "no such workspace")
	}
	return msgapi.Errorf(msgapi.CodeNotFound, "workspace %q does not exist", id)
}

// SetSecret stores a per-channel inbound webhook secret on a workspace,
// encrypted when a keyring is configured (secrets.go).
func (s *Store) SetSecret(ctx context.Context, id, channel, secret string) error {
	stored, err := s.seal(id, channel, secret)
	if err != nil {
		return err
	}
	res, err := s.workspaces.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "secrets." + channel, Value: stored}}}})
	if err != nil {
		return msgapi.Unavailable(fmt.Errorf("set %s secret on %s: %w", channel, id, err))
	}
	if res.MatchedCount == 0 {
		return errNoWorkspace(id)
	}
	return nil
}

// UpdateSettings applies a settings patch and returns the workspace. Every
// process sees the change within the cache TTL; this one at once.
func (s *Store) UpdateSettings(ctx context.Context, id string, p SettingsPatch) (Workspace, error) {
	if p.Empty() {
		return s.Get(ctx, id)
	}
	return s.update(ctx, id, p.update())
}

// SetDisabled disables (or enables) a workspace and returns it. Its keys
// are refused (or accepted again) in every process within the cache TTL;
// in this one at once.
func (s *Store) SetDisabled(ctx context.Context, id string, disabled bool) (Workspace, error) {
	u := bson.D{{Key: "$set", Value: bson.D{{Key: "disabled", Value: true}}}}
	if !disabled {
		u = bson.D{{Key: "$unset", Value: bson.D{{Key: "disabled", Value: ""}}}}
	}
	return s.update(ctx, id, u)
}

// update changes one workspace document and forgets this process's cached
// copies of it. Last writer wins: these are settings, not races to decide.
func (s *Store) update(ctx context.Context, id string, u bson.D) (Workspace, error) {
	var ws Workspace
	err := s.workspaces.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}}, u,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&ws)
	switch {
	case store.IsNotFound(err):
		return Workspace{}, errNoWorkspace(id)
	case err != nil:
		return Workspace{}, msgapi.Unavailable(fmt.Errorf("update workspace %s: %w", id, err))
	}
	s.forgetWorkspace(id)
	return ws, nil
}
