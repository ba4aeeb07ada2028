// Package workspace owns workspaces (customer accounts) and their API keys.
//
// A key is 32 random bytes shown once, at creation. Only its SHA-256 is
// stored, as the _id of its api_keys document, so authentication is one read
// by _id and a leaked database holds no usable key. Plain SHA-256 (not a slow
// password hash) is right here because the key has 256 bits of entropy:
// there is nothing to brute-force.
package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
)

// KeyPrefix starts every API key, so a leaked key is recognisable (secret
// scanners) and a key pasted into the wrong header is easy to spot.
const KeyPrefix = "mk_"

// Collections used by this package.
var Collections = []store.Collection{{Name: "workspaces"}, {Name: "api_keys"}}

// Workspace is one customer account.
type Workspace struct {
	ID        string    `bson:"_id" json:"workspaceId"`
	Name      string    `bson:"name" json:"name"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	// Secrets holds per-channel inbound webhook secrets (slack, twilio,
	// telegram, email) as stored: sealed when a keyring is configured, so
	// read them with Store.Secret. Never returned by the API.
	Secrets map[string]string `bson:"secrets,omitempty" json:"-"`
}

type apiKey struct {
	Hash        string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	CreatedAt   time.Time `bson:"createdAt"`
}

// Store reads and writes workspaces and keys, with a short-lived in-process
// cache of key → workspace so authentication costs no round trip when warm.
type Store struct {
	workspaces *mongo.Collection
	keys       *mongo.Collection
	cacheTTL   time.Duration
	now        func() time.Time
	keyring    *secrets.Keyring // seals channel secrets; nil stores them in clear (secrets.go)

	mu    sync.Mutex
	cache map[string]cached // key hash → workspace
	// group collapses concurrent cold lookups of one key into one read, so a
	// burst on a cold cache costs the store one lookup, not one per request.
	group singleflight.Group
}

type cached struct {
	ws      Workspace
	expires time.Time
}

// maxCached bounds the cache; past it the cache is cleared (cheap, and
// refilled by the next requests).
const maxCached = 10000

// NewStore returns a Store. cacheTTL 0 disables the cache.
func NewStore(s *store.Store, cacheTTL time.Duration) *Store {
	return &Store{
		workspaces: s.Collection("workspaces"),
		keys:       s.Collection("api_keys"),
		cacheTTL:   cacheTTL,
		now:        time.Now,
		cache:      map[string]cached{},
	}
}

// Create makes a workspace and its first API key, returned once.
func (s *Store) Create(ctx context.Context, name string) (Workspace, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Workspace{}, "", &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the workspace name is invalid",
			Fields: []msgapi.FieldError{{Field: "name", Message: "required, at most 200 bytes"}}}
	}
	ws := Workspace{ID: msgapi.NewID("ws"), Name: name, CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	if _, err := s.workspaces.InsertOne(ctx, ws); err != nil {
		return Workspace{}, "", msgapi.Unavailable(fmt.Errorf("insert workspace: %w", err))
	}
	key, err := s.addKey(ctx, ws.ID)
	if err != nil {
		return Workspace{}, "", err
	}
	return ws, key, nil
}

// NewKey adds an API key to an existing workspace.
func (s *Store) NewKey(ctx context.Context, workspaceID string) (string, error) {
	if _, err := s.Get(ctx, workspaceID); err != nil {
		return "", err
	}
	return s.addKey(ctx, workspaceID)
}

func (s *Store) addKey(ctx context.Context, workspaceID string) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key := KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	doc := apiKey{Hash: HashKey(key), WorkspaceID: workspaceID, CreatedAt: s.now().UTC()}
	if _, err := s.keys.InsertOne(ctx, doc); err != nil {
		return "", msgapi.Unavailable(fmt.Errorf("insert api key: %w", err))
	}
	return key, nil
}

// Get reads a workspace by id.
func (s *Store) Get(ctx context.Context, id string) (Workspace, error) {
	var ws Workspace
	err := s.workspaces.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&ws)
	switch {
	case store.IsNotFound(err):
		return Workspace{}, msgapi.Errorf(msgapi.CodeNotFound, "workspace %q does not exist", id)
	case err != nil:
		return Workspace{}, msgapi.Unavailable(fmt.Errorf("read workspace %s: %w", id, err))
	}
	return ws, nil
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
		return msgapi.Errorf(msgapi.CodeNotFound, "workspace %q does not exist", id)
	}
	return nil
}

// Authenticate resolves an API key to its workspace. A missing or unknown
// key is CodeUnauthorized; the key itself never appears in an error.
func (s *Store) Authenticate(ctx context.Context, key string) (Workspace, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) > 200 {
		return Workspace{}, errUnauthorized
	}
	h := HashKey(key)
	now := s.now()
	if s.cacheTTL > 0 {
		s.mu.Lock()
		c, ok := s.cache[h]
		s.mu.Unlock()
		if ok && now.Before(c.expires) {
			return c.ws, nil
		}
	}
	v, err, _ := s.group.Do(h, func() (any, error) { return s.lookup(ctx, h) })
	if err != nil {
		return Workspace{}, err
	}
	ws := v.(Workspace)
	if s.cacheTTL > 0 {
		s.mu.Lock()
		if len(s.cache) >= maxCached {
			clear(s.cache)
		}
		s.cache[h] = cached{ws: ws, expires: now.Add(s.cacheTTL)}
		s.mu.Unlock()
	}
	return ws, nil
}

// lookup reads the key's workspace from the store: two reads by _id.
func (s *Store) lookup(ctx context.Context, hash string) (Workspace, error) {
	var k apiKey
	err := s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: hash}}).Decode(&k)
	switch {
	case store.IsNotFound(err):
		return Workspace{}, errUnauthorized
	case err != nil:
		return Workspace{}, msgapi.Unavailable(fmt.Errorf("read api key: %w", err))
	}
	ws, err := s.Get(ctx, k.WorkspaceID)
	if msgapi.ErrorCode(err) == msgapi.CodeNotFound {
		return Workspace{}, errUnauthorized
	}
	return ws, err
}

var errUnauthorized = msgapi.Errorf(msgapi.CodeUnauthorized, "a valid API key is required: Authorization: Bearer <key>")

// HashKey is the stored form of a key: hex SHA-256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
