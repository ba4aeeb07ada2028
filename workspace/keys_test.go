package workspace_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

// clock is a settable test clock, safe for the background goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rounds runs f and returns the store commands it cost, after waiting for
// the background work it started.
func rounds(st *store.Store, ws *workspace.Store, f func()) int64 {
	ws.Wait()
	before := st.RoundTrips.Total()
	f()
	ws.Wait()
	return st.RoundTrips.Total() - before
}

func mustAuth(t *testing.T, s *workspace.Store, key, wantID string) workspace.Workspace {
	t.Helper()
	ws, err := s.Authenticate(context.Background(), key)
	if err != nil || ws.ID != wantID {
		t.Fatalf("Authenticate = %q, %v; want %s", ws.ID, err, wantID)
	}
	return ws
}

func mustRefuse(t *testing.T, s *workspace.Store, key, why string) {
	t.Helper()
	if _, err := s.Authenticate(context.Background(), key); msgapi.ErrorCode(err) != msgapi.CodeUnauthorized {
		t.Fatalf("%s: Authenticate = %v, want unauthorized", why, err)
	}
}

// A revoked key and a disabled workspace are refused by another process
// within the cache TTL, and a key in use costs that process no round trip
// on the request path meanwhile.
func TestRevocationReachesEveryProcessWithinTheTTL(t *testing.T) {
	const ttl = 5 * time.Second
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	admin := workspace.New(workspace.Options{Store: st, CacheTTL: ttl})
	ws, key, err := admin.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.NewKey(ctx, ws.ID, false)
	if err != nil {
		t.Fatal(err)
	}

	st2 := storetest.Second(t, st)
	clk := newClock()
	proc := workspace.New(workspace.Options{Store: st2, CacheTTL: ttl, Now: clk.Now})
	mustAuth(t, proc, key, ws.ID)
	mustAuth(t, proc, other, ws.ID)

	// In steady state the request path costs nothing: past half the TTL a
	// request is answered from the cache and the key is re-read behind it,
	// so past the first read's expiry the key is still warm.
	clk.Add(ttl/2 + 2*time.Second) // 4.5 s: served, and re-read in the background
	mustAuth(t, proc, key, ws.ID)
	proc.Wait()
	clk.Add(2 * time.Second) // 6.5 s: past the first read's expiry, 2 s into the second
	if n := rounds(st2, proc, func() { mustAuth(t, proc, key, ws.ID) }); n != 0 {
		t.Errorf("a key in use past its first TTL cost %d round trips, want 0 (re-read ahead)", n)
	}

	// Revoke one key in the admin process.
	keys, err := admin.Keys(ctx, ws.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("Keys = %v, %v; want 2", keys, err)
	}
	// The list is by creation time, then by hash: two keys made in one
	// millisecond come in either order, so pick key's entry by its prefix.
	if keys[0].Prefix != workspace.Prefix(key) {
		keys[0], keys[1] = keys[1], keys[0]
	}
	if keys[0].Prefix != workspace.Prefix(key) {
		t.Fatalf("no entry of Keys has key's prefix %q: %v", workspace.Prefix(key), keys)
	}
	if err := admin.RevokeKey(ctx, ws.ID, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, admin, key, "revoking process, at once")
	// The other process may go on accepting it until its read expires
	// (at most the TTL after the revocation), and never after.
	revokedAt := clk.Now()
	for clk.Now().Sub(revokedAt) < ttl {
		_, _ = proc.Authenticate(ctx, key)
		clk.Add(time.Second)
		proc.Wait()
	}
	mustRefuse(t, proc, key, "other process, TTL after the revocation")
	mustAuth(t, proc, other, ws.ID)
	if err := admin.RevokeKey(ctx, ws.ID, keys[0].ID); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
		t.Errorf("revoking twice = %v, want not found", err)
	}

	// Disable the workspace: its other key is refused within the TTL too.
	if _, err := admin.SetDisabled(ctx, ws.ID, true); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	proc.Wait()
	mustRefuse(t, proc, other, "disabled workspace, TTL later")
	if _, err := proc.Authenticate(ctx, other); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("disabled workspace: %v, want a message that says so", err)
	}
	if _, err := admin.SetDisabled(ctx, ws.ID, false); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	proc.Wait()
	mustAuth(t, proc, other, ws.ID)
}

// Keys made before ids and prefixes existed ({_id: hash, workspaceId,
// createdAt}) keep working, are listed with a derived id, can be revoked,
// and get their prefix stored on first use.
func TestLegacyKeys(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	s := workspace.NewStore(st, time.Minute)
	ws, _, err := s.Create(ctx, "Old")
	if err != nil {
		t.Fatal(err)
	}
	const key = "mk_aI0OBQZCAQyxfAQOwvr_YoAHfvpwGSRpjgT2M8N5Xfw"
	h := workspace.HashKey(key)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := st.Collection("api_keys").InsertOne(ctx, bson.D{
		{Key: "_id", Value: h}, {Key: "workspaceId", Value: ws.ID}, {Key: "createdAt", Value: created},
	}); err != nil {
		t.Fatal(err)
	}

	find := func() workspace.Key {
		t.Helper()
		keys, err := s.Keys(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.CreatedAt.Equal(created) {
				return k
			}
		}
		t.Fatalf("the legacy key is not listed: %+v", keys)
		return workspace.Key{}
	}
	k := find()
	if k.ID != workspace.KeyID(h) || !strings.HasPrefix(k.ID, "key_") || k.Prefix != "" || k.LastUsedAt != nil {
		t.Errorf("listed before use: %+v, want id %s, no prefix, never used", k, workspace.KeyID(h))
	}

	mustAuth(t, s, key, ws.ID)
	s.Wait()
	k = find()
	if k.ID != workspace.KeyID(h) || k.Prefix != "mk_aI0O...5Xfw" || k.LastUsedAt == nil {
		t.Errorf("listed after use: %+v, want the same id, prefix mk_aI0O...5Xfw and lastUsedAt", k)
	}
	var doc bson.M
	if err := st.Collection("api_keys").FindOne(ctx, bson.D{{Key: "_id", Value: h}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["keyId"] != k.ID || doc["prefix"] != k.Prefix {
		t.Errorf("stored %v, want keyId and prefix written on first use", doc)
	}

	if err := s.RevokeKey(ctx, ws.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, s, key, "revoked legacy key")
}

// lastUsedAt is written at most once a TouchInterval per key and process,
// never on the request path.
func TestLastUsedAtIsWrittenOnceAMinute(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	clk := newClock()
	s := workspace.New(workspace.Options{Store: st, CacheTTL: time.Hour, Now: clk.Now})
	ws, key, err := s.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	updates := func(f func()) int64 {
		s.Wait()
		before := st.RoundTrips.ByName()["update"]
		f()
		s.Wait()
		return st.RoundTrips.ByName()["update"] - before
	}
	if n := updates(func() {
		for range 50 {
			mustAuth(t, s, key, ws.ID)
			clk.Add(time.Second) // 50 s in all
		}
	}); n != 1 {
		t.Errorf("50 requests in 50 s wrote lastUsedAt %d times, want 1", n)
	}
	clk.Add(workspace.TouchInterval)
	if n := updates(func() { mustAuth(t, s, key, ws.ID) }); n != 1 {
		t.Errorf("a request a minute later wrote lastUsedAt %d times, want 1", n)
	}
	keys, err := s.Keys(ctx, ws.ID)
	if err != nil || len(keys) != 1 || keys[0].LastUsedAt == nil || !keys[0].LastUsedAt.Equal(clk.Now()) {
		t.Errorf("Keys = %+v, %v; want lastUsedAt %v", keys, err, clk.Now())
	}
	if keys[0].Prefix != workspace.Prefix(key) || !strings.HasPrefix(key, strings.TrimSuffix(keys[0].Prefix[:7], ".")) {
		t.Errorf("prefix %q of key: want %q", keys[0].Prefix, workspace.Prefix(key))
	}
}

// One caller of a shared cold lookup hangs up: it gets its own error at
// once, and every other caller waiting on the same lookup still gets the
// workspace (today's bug: they all got 503).
func TestSharedLookupSurvivesACallerThatHangsUp(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	ws, key, err := workspace.NewStore(st, 0).Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	s := workspace.NewStore(storetest.Second(t, st), time.Minute)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var lookups atomic.Int64
	s.SetBeforeLookup(func(lctx context.Context) {
		lookups.Add(1)
		started <- struct{}{}
		select { // a slow store: the lookup waits until released, or until its own context ends
		case <-release:
		case <-lctx.Done():
		}
	})

	first, hangUp := context.WithCancel(ctx)
	firstErr := make(chan error, 1)
	go func() {
		_, err := s.Authenticate(first, key)
		firstErr <- err
	}()
	<-started

	const waiters = 40
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.Authenticate(ctx, key)
			if err != nil || got.ID != ws.ID {
				failed.Add(1)
				t.Errorf("a waiting caller: %q, %v", got.ID, err)
				return
			}
			ok.Add(1)
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the waiters join the lookup in flight
	hangUp()
	select {
	case err := <-firstErr:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that hung up: %v, want its own cancellation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller that hung up is still waiting for the shared lookup")
	}
	close(release)
	wg.Wait()
	if ok.Load() != waiters || failed.Load() != 0 {
		t.Errorf("%d of %d waiting callers succeeded, %d failed; want all", ok.Load(), waiters, failed.Load())
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d store lookups, want 1 shared", n)
	}
}

// Unknown keys cost one store read per distinct key, then nothing until
// NegativeTTL; a flood of distinct keys cannot grow the negative cache past
// its size.
func TestUnknownKeysAreCachedBounded(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	clk := newClock()
	s := workspace.New(workspace.Options{Store: st, CacheTTL: time.Minute, Now: clk.Now})
	const size = 50
	s.SetNegativeSize(size)
	unknown := "mk_" + strings.Repeat("x", 43)

	if n := rounds(st, s, func() { mustRefuse(t, s, unknown, "unknown key") }); n != 1 {
		t.Errorf("first try of an unknown key: %d round trips, want 1", n)
	}
	if n := rounds(st, s, func() {
		for range 100 {
			mustRefuse(t, s, unknown, "unknown key again")
		}
	}); n != 0 {
		t.Errorf("100 more tries of the same unknown key: %d round trips, want 0", n)
	}
	clk.Add(workspace.NegativeTTL)
	if n := rounds(st, s, func() { mustRefuse(t, s, unknown, "unknown key after the TTL") }); n != 1 {
		t.Errorf("after NegativeTTL: %d round trips, want 1", n)
	}
	for i := range 3 * size {
		mustRefuse(t, s, unknown+string(rune('a'+i%26))+strings.Repeat("y", i/26), "flood")
	}
	if got := s.UnknownKeys(); got > size {
		t.Errorf("negative cache holds %d keys after a flood of %d, want at most %d", got, 3*size, size)
	}
	// Malformed keys never reach the store.
	if n := rounds(st, s, func() { mustRefuse(t, s, "sk_live_abc", "not an mk_ key") }); n != 0 {
		t.Errorf("a key without mk_: %d round trips, want 0", n)
	}
}

// Inbound webhooks name a workspace id in the URL: a malformed one costs
// nothing, an unknown one a single read per TTL.
func TestFindRemembersUnknownWorkspaces(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	s := workspace.NewStore(st, time.Minute)
	ws, _, err := s.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Find(ctx, ws.ID); err != nil || got.ID != ws.ID {
		t.Fatalf("Find(known) = %q, %v", got.ID, err)
	}
	for _, bad := range []string{"", "ws_nope", strings.Repeat("w", 60000), "ws_" + strings.Repeat("A", 26), ws.ID + "a"} {
		if n := rounds(st, s, func() {
			if _, err := s.Find(ctx, bad); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
				t.Errorf("Find(malformed %.20q) = %v, want not found", bad, err)
			}
		}); n != 0 {
			t.Errorf("Find(malformed %.20q): %d round trips, want 0", bad, n)
		}
	}
	unknown := msgapi.NewID("ws")
	for i, want := range []int64{1, 0, 0} {
		if n := rounds(st, s, func() {
			if _, err := s.Find(ctx, unknown); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
				t.Errorf("Find(unknown) = %v, want not found", err)
			}
		}); n != want {
			t.Errorf("Find(unknown) try %d: %d round trips, want %d", i+1, n, want)
		}
	}
}
