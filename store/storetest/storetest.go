// Package storetest gives integration tests a real store: one embedded engine
// per test binary (or the MongoDB at MSGAPI_TEST_MONGODB_URI when it is set),
// and a fresh database per test, dropped when the test ends.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/store"
)

var (
	once     sync.Once
	engine   *store.Embedded
	dataDir  string
	startErr error
	seq      atomic.Int64
)

// URI returns the connection string of the shared test engine (its Unix
// socket) and, for the embedded engine, its data folder.
func URI(t testing.TB) (uri, sqliteDir string) {
	t.Helper()
	if u := os.Getenv("MSGAPI_TEST_MONGODB_URI"); u != "" {
		return u, ""
	}
	once.Do(func() {
		dataDir, startErr = os.MkdirTemp("", "msgapi-test-store-")
		if startErr != nil {
			return
		}
		engine, startErr = store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: dataDir, Log: zerolog.Nop()})
	})
	if startErr != nil {
		t.Fatalf("start embedded test store: %v", startErr)
	}
	return engine.URI(), dataDir
}

// Main runs the tests and then stops the shared engine and removes its data.
// Use it from TestMain: func TestMain(m *testing.M) { storetest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if engine != nil {
		engine.Stop()
		_ = os.RemoveAll(dataDir)
	}
	os.Exit(code)
}

// New opens a fresh database on the shared engine, creates the given
// collections and drops the database when the test ends.
func New(t testing.TB, colls ...store.Collection) *store.Store {
	t.Helper()
	uri, dir := URI(t)
	sum := sha256.Sum256([]byte(t.Name()))
	name := fmt.Sprintf("t%s_%d", hex.EncodeToString(sum[:6]), seq.Add(1))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, store.Options{URI: uri, SQLiteDir: dir, Database: name, ConnectTimeout: 10 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open test store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DB.Drop(ctx); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		_ = s.Close(ctx)
	})
	if err := s.Ensure(ctx, colls...); err != nil {
		t.Fatalf("ensure collections: %v", err)
	}
	return s
}

// Second opens another client on st's database: what a second msgapi
// process would have. It is closed when the test ends.
func Second(t testing.TB, st *store.Store) *store.Store {
	t.Helper()
	uri, dir := URI(t)
	s2, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: st.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close(context.Background()) })
	return s2
}
