package workspace_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestKeysAreHashedAndAuthenticate(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	ws, key, err := workspace.NewStore(st, time.Minute).Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, workspace.KeyPrefix) || len(key) < 40 {
		t.Fatalf("key %q: want mk_ and at least 32 bytes of entropy", key)
	}
	// Only the hash is stored.
	raw, err := st.Collection("api_keys").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := raw.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0]["_id"] != workspace.HashKey(key) {
		t.Fatalf("api_keys = %v, want one document keyed by the key's hash", docs)
	}
	for _, v := range docs[0] {
		if s, ok := v.(string); ok && strings.Contains(s, key) {
			t.Fatal("the plaintext key is stored")
		}
	}

	// A fresh store (another process, cold cache): 16 concurrent requests
	// with the key cost one lookup (two reads), then nothing.
	s2 := workspace.NewStore(st, time.Minute)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := s2.Authenticate(ctx, key)
			if err != nil || got.ID != ws.ID {
				t.Errorf("Authenticate = %v, %v; want %s", got.ID, err, ws.ID)
			}
		}()
	}
	beforeBy := st.RoundTrips.ByName()
	close(start)
	wg.Wait()
	s2.Wait() // the lastUsedAt write, off the request path
	afterBy := st.RoundTrips.ByName()
	if n := afterBy["find"] - beforeBy["find"]; n > 2*2 || n < 2 {
		// singleflight collapses overlapping lookups; goroutines that start
		// after the first finished hit the cache. Allow one straggler pair.
		t.Errorf("cold burst cost %d reads, want 2 (at most 4)", n)
	}
	if n := afterBy["update"] - beforeBy["update"]; n != 1 {
		t.Errorf("cold burst wrote lastUsedAt %d times, want once", n)
	}
	before := st.RoundTrips.Total()
	if _, err := s2.Authenticate(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := st.RoundTrips.Total() - before; n != 0 {
		t.Errorf("warm cache cost %d round trips, want 0", n)
	}

	for _, bad := range []string{"", "mk_nope", key + "x", strings.ToUpper(key)} {
		if _, err := s2.Authenticate(ctx, bad); msgapi.ErrorCode(err) != msgapi.CodeUnauthorized {
			t.Errorf("Authenticate(%q) = %v, want unauthorized", bad, err)
		}
	}
}

func TestNewKeyForUnknownWorkspace(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	if _, err := workspace.NewStore(st, 0).NewKey(context.Background(), "ws_nope", false); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
		t.Errorf("NewKey for an unknown workspace = %v, want not found", err)
	}
}
