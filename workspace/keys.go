package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// KeyPrefix starts every API key, so a leaked key is recognisable (secret
// scanners) and a key pasted into the wrong header is easy to spot.
const KeyPrefix = "mk_"

// TestKeyPrefix starts a test key: every send through it runs the whole
// send path on the log provider and reaches no one (README: Test keys).
// The prefix is part of the key, which only its hash identifies, so it
// cannot be added to a live key.
const TestKeyPrefix = "mk_test_"

// IsTestKey reports whether key is a test key.
func IsTestKey(key string) bool { return strings.HasPrefix(key, TestKeyPrefix) }

const (
	// NegativeTTL and NegativeSize bound the negative caches (unknown keys,
	// unknown webhook workspace ids). Keys and workspace ids are random and
	// made by the server, so no value that was unknown a moment ago can have
	// become valid since: the TTL only returns memory.
	NegativeTTL  = time.Minute
	NegativeSize = 10_000
	// TouchInterval is how often, at most, a process writes a key's
	// lastUsedAt: never on the request path, and not more than once a
	// minute per key and process.
	TouchInterval = time.Minute
	// LookupTimeout bounds one store lookup of a key. The lookup is shared
	// by every request waiting for the same key, so it runs on its own
	// context: a caller that hangs up stops waiting, not the lookup.
	LookupTimeout = 5 * time.Second
	// maxCached bounds the positive cache; past it the cache is cleared
	// (cheap, and refilled by the next requests).
	maxCached = 10_000
)

// Key is what the admin API shows of an API key: never the key itself.
type Key struct {
	ID          string
	WorkspaceID string
	// Prefix is the part of the key that may be shown ("mk_AbCd...wXyZ");
	// empty for a key made before prefixes were stored that has not been
	// used since.
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt *time.Time // nil: never used (or not since lastUsedAt exists)
	Test       bool       // a test key (mk_test_…)
}

// apiKey is the stored document. keyId and prefix are absent on keys made
// before they existed: KeyID derives the id from the hash on read, and the
// first use of such a key stores both (it is the only moment the plaintext,
// and so the prefix, is known).
type apiKey struct {
	Hash        string     `bson:"_id"`
	KeyID       string     `bson:"keyId,omitempty"`
	Prefix      string     `bson:"prefix,omitempty"`
	WorkspaceID string     `bson:"workspaceId"`
	CreatedAt   time.Time  `bson:"createdAt"`
	LastUsedAt  *time.Time `bson:"lastUsedAt,omitempty"`
	Test        bool       `bson:"test,omitempty"`
}

func (k apiKey) public() Key {
	id := k.KeyID
	if id == "" {
		id = KeyID(k.Hash)
	}
	return Key{ID: id, WorkspaceID: k.WorkspaceID, Prefix: k.Prefix, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, Test: k.Test}
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// KeyID is the public id of the key whose stored hash is hash ("key_" and
// 26 base32 characters). It is derived rather than random so that keys made
// before ids existed have the same id in every process without a migration
// race; it reveals nothing about the key (a hash of its hash).
func KeyID(hash string) string {
	sum := sha256.Sum256([]byte("msgapi key id\x00" + hash))
	return "key_" + strings.ToLower(idEncoding.EncodeToString(sum[:16]))
}

// Prefix is what may be shown of key: "mk_", its next four characters,
// "...", and its last four (48 of its 256 bits; the rest stays secret).
func Prefix(key string) string {
	if len(key) < len(KeyPrefix)+12 {
		return KeyPrefix + "..."
	}
	return key[:len(KeyPrefix)+4] + "..." + key[len(key)-4:]
}

// HashKey is the stored form of a key: hex SHA-256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewKey adds an API key to an existing workspace; test makes it a test
// key (mk_test_…).
func (s *Store) NewKey(ctx context.Context, workspaceID string, test bool) (string, error) {
	if _, err := s.Get(ctx, workspaceID); err != nil {
		return "", err
	}
	return s.addKey(ctx, workspaceID, test)
}

func (s *Store) addKey(ctx context.Context, workspaceID string, test bool) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	prefix := KeyPrefix
	if test {
		prefix = TestKeyPrefix
	}
	key := prefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := HashKey(key)
	doc := apiKey{Hash: h, KeyID: KeyID(h), Prefix: Prefix(key), WorkspaceID: workspaceID, Test: test,
		CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	if _, err := s.keys.InsertOne(ctx, doc); err != nil {
		return "", msgapi.Unavailable(fmt.Errorf("insert api key: %w", err))
	}
	return key, nil
}

// Keys lists a workspace's keys, oldest first. It filters api_keys on
// workspaceId, which the embedded engine answers with a scan: fine for an
// admin call over a collection of keys, never used on the request path.
func (s *Store) Keys(ctx context.Context, workspaceID string) ([]Key, error) {
	if _, err := s.Get(ctx, workspaceID); err != nil {
		return nil, err
	}
	docs, err := s.keysOf(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.public())
	}
	return out, nil
}

func (s *Store) keysOf(ctx context.Context, workspaceID string) ([]apiKey, error) {
	cur, err := s.keys.Find(ctx, bson.D{{Key: "workspaceId", Value: workspaceID}},
		options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("list api keys of %s: %w", workspaceID, err))
	}
	var docs []apiKey
	if err := cur.All(ctx, &docs); err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("list api keys of %s: %w", workspaceID, err))
	}
	return docs, nil
}

// RevokeKey deletes one key of a workspace. This process refuses it at once,
// every other process within the cache TTL.
func (s *Store) RevokeKey(ctx context.Context, workspaceID, keyID string) error {
	docs, err := s.keysOf(ctx, workspaceID)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d.public().ID != keyID {
			continue
		}
		res, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: d.Hash}})
		if err != nil {
			return msgapi.Unavailable(fmt.Errorf("delete api key %s: %w", keyID, err))
		}
		s.forgetKey(d.Hash)
		if res.DeletedCount == 0 {
			break // revoked by a concurrent call
		}
		return nil
	}
	return msgapi.Errorf(msgapi.CodeNotFound, "workspace %q has no API key %q", workspaceID, keyID)
}

// Authenticate resolves an API key to its workspace. A missing, unknown or
// revoked key, or one of a disabled workspace, is CodeUnauthorized; the key
// itself never appears in an error.
func (s *Store) Authenticate(ctx context.Context, key string) (Workspace, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) > 200 {
		return Workspace{}, errUnauthorized
	}
	h := HashKey(key)
	now := s.now()
	if s.unknownKeys.has(h, now) {
		return Workspace{}, errUnauthorized
	}
	s.mu.Lock()
	c, ok := s.cache[h]
	if ok && s.cacheTTL > 0 && now.Sub(c.fetched) < s.cacheTTL {
		// Re-read a key in use before it expires, off the request path.
		if !c.refreshing && now.Sub(c.fetched) >= s.cacheTTL/2 {
			c.refreshing = true
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				_, _ = s.fetch(context.Background(), h)
			}()
		}
		ws := c.ws
		s.touchIfDue(h, key, c, now)
		s.mu.Unlock()
		return usable(ws, key)
	}
	s.mu.Unlock()

	f, err := s.fetch(ctx, h)
	if err != nil {
		return Workspace{}, err
	}
	s.mu.Lock()
	if c, ok := s.cache[h]; ok {
		s.touchIfDue(h, key, c, now)
	}
	s.mu.Unlock()
	return usable(f.ws, key)
}

func usable(ws Workspace, key string) (Workspace, error) {
	if ws.Disabled {
		return Workspace{}, errDisabled
	}
	ws.TestKey = IsTestKey(key)
	return ws, nil
}

var (
	errUnauthorized = msgapi.Errorf(msgapi.CodeUnauthorized, "a valid API key is required: Authorization: Bearer <key>")
	errDisabled     = msgapi.Errorf(msgapi.CodeUnauthorized, "the workspace of this API key is disabled")
)

// cached is what one process believes about one key.
type cached struct {
	ws         Workspace
	fetched    time.Time // when the read it came from started
	touched    time.Time // lastUsedAt as last read or written
	legacy     bool      // stored without keyId and prefix
	refreshing bool
}

// found is one lookup's result.
type found struct {
	ws      Workspace
	key     apiKey
	started time.Time
}

// fetch reads a key and its workspace, shared by every caller waiting for
// the same key (singleflight), on a context of its own: a caller that goes
// away stops waiting with its own error, and the others still get the
// answer. The result is remembered before the waiters are released.
func (s *Store) fetch(ctx context.Context, h string) (found, error) {
	ch := s.group.DoChan(h, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LookupTimeout)
		defer cancel()
		started := s.now()
		f, err := s.lookup(lctx, h)
		f.started = started
		s.remember(h, f, err)
		return f, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return found{}, r.Err
		}
		return r.Val.(found), nil
	case <-ctx.Done():
		return found{}, msgapi.Unavailable(fmt.Errorf("api key lookup abandoned: %w", context.Cause(ctx)))
	}
}

// lookup reads the key's workspace from the store: two reads by _id.
func (s *Store) lookup(ctx context.Context, hash string) (found, error) {
	if s.beforeLookup != nil {
		s.beforeLookup(ctx)
	}
	var k apiKey
	err := s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: hash}}).Decode(&k)
	switch {
	case store.IsNotFound(err):
		return found{}, errUnauthorized
	case err != nil:
		return found{}, msgapi.Unavailable(fmt.Errorf("read api key: %w", err))
	}
	ws, err := s.Get(ctx, k.WorkspaceID)
	if msgapi.ErrorCode(err) == msgapi.CodeNotFound {
		return found{}, errUnauthorized
	}
	return found{ws: ws, key: k}, err
}

// remember records a lookup: a known key in the cache, an unknown one in
// the negative cache. A store error changes nothing: the cached entry, if
// any, still expires on time.
func (s *Store) remember(h string, f found, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cache[h]
	switch {
	case msgapi.ErrorCode(err) == msgapi.CodeUnauthorized:
		delete(s.cache, h)
		s.unknownKeys.add(h, s.now())
		return
	case err != nil:
		if c != nil {
			c.refreshing = false
		}
		return
	}
	if c == nil {
		if len(s.cache) >= maxCached {
			clear(s.cache)
		}
		c = &cached{}
		s.cache[h] = c
	}
	c.ws, c.fetched, c.refreshing = f.ws, f.started, false
	c.legacy = f.key.KeyID == "" || f.key.Prefix == ""
	if f.key.LastUsedAt != nil && f.key.LastUsedAt.After(c.touched) {
		c.touched = *f.key.LastUsedAt
	}
}

// touchIfDue writes the key's lastUsedAt in the background when this
// process has not seen it written within TouchInterval; a key stored
// without keyId and prefix gets them in the same write. Call with s.mu held.
func (s *Store) touchIfDue(h, key string, c *cached, now time.Time) {
	if now.Sub(c.touched) < TouchInterval && !c.legacy {
		return
	}
	c.touched = now
	set := bson.D{{Key: "lastUsedAt", Value: now.UTC().Truncate(time.Millisecond)}}
	if c.legacy {
		set = append(set, bson.E{Key: "keyId", Value: KeyID(h)}, bson.E{Key: "prefix", Value: Prefix(key)})
		c.legacy = false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), LookupTimeout)
		defer cancel()
		// Best effort: a lost write only makes lastUsedAt older. No upsert:
		// a key revoked meanwhile stays gone.
		_, _ = s.keys.UpdateOne(ctx, bson.D{{Key: "_id", Value: h}}, bson.D{{Key: "$set", Value: set}})
	}()
}

// forgetKey drops a revoked key from this process at once.
func (s *Store) forgetKey(h string) {
	s.mu.Lock()
	delete(s.cache, h)
	s.mu.Unlock()
	s.unknownKeys.add(h, s.now())
}

// forgetWorkspace drops this process's cached keys of a workspace, so a
// change to it applies here at once.
func (s *Store) forgetWorkspace(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, c := range s.cache {
		if c.ws.ID == id {
			delete(s.cache, h)
		}
	}
}

// negative is a bounded set of values with an expiry. When full, adding
// evicts an arbitrary entry: memory stays bounded whatever a flood sends,
// and a value that keeps coming back is re-added by its next miss.
type negative struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[string]time.Time
}

func newNegative(ttl time.Duration, size int) *negative {
	return &negative{ttl: ttl, max: size, m: map[string]time.Time{}}
}

func (n *negative) has(k string, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	exp, ok := n.m[k]
	if ok && !now.Before(exp) {
		delete(n.m, k)
		return false
	}
	return ok
}

func (n *negative) add(k string, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.m[k]; !ok && len(n.m) >= n.max {
		for old := range n.m {
			delete(n.m, old)
			break
		}
	}
	n.m[k] = now.Add(n.ttl)
}
