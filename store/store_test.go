package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var things = store.Collection{Name: "things", ExpiresField: "expiresAt"}

// The fact every guard in msgapi rests on: of N concurrent inserts of one
// _id, exactly one wins and the others get a duplicate-key error. The
// inserts come through four clients, as from four processes: within one
// process the embedded engine's writes queue (writegate.go), between
// processes they meet at the engine.
func TestConcurrentInsertsOneWinner(t *testing.T) {
	s := storetest.New(t, things)
	clients := []*store.Store{s, storetest.Second(t, s), storetest.Second(t, s), storetest.Second(t, s)}
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		const n = 16
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			won     int
			dup     int
			otherEr []error
		)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				_, err := clients[i%len(clients)].Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("k%d", round)}, {Key: "by", Value: i}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case store.IsDuplicateKey(err):
					dup++
				default:
					otherEr = append(otherEr, err)
				}
			}(i)
		}
		close(start)
		wg.Wait()
		if won != 1 || dup != n-1 || len(otherEr) > 0 {
			t.Fatalf("round %d: won=%d dup=%d other=%v, want 1 winner and %d duplicates", round, won, dup, otherEr, n-1)
		}
	}
}

// The engine's own plans for reads by _id — equal, $in, and beside other
// conditions — go through the collection's unique _id index
// (third_party/ferretdb/PATCHES.md, patch 7), not a scan (embedded only).
func TestIDLookupUsesIndex(t *testing.T) {
	uri, dir := storetest.URI(t)
	if dir == "" {
		t.Logf("store at %s is not the embedded engine; the SQLite index does not apply", store.Redact(uri))
		return
	}
	s := storetest.New(t, things)
	for _, filter := range []bson.D{
		{{Key: "_id", Value: "x"}},
		{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"x", "y"}}}}},
		{{Key: "_id", Value: "x"}, {Key: "messageId", Value: "m"}},
	} {
		var res struct {
			QueryPlanner struct{ Plan []string } `bson:"queryPlanner"`
		}
		err := s.DB.RunCommand(context.Background(), bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "things"}, {Key: "filter", Value: filter}}}}).Decode(&res)
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(res.QueryPlanner.Plan, "\n")
		if !strings.Contains(plan, "USING INDEX") || !strings.Contains(plan, "__id_") {
			t.Errorf("the engine's plan for %v:\n%s\nwant it to use the unique _id index (<table>__id_)", filter, plan)
		}
	}
}

// The _id index an earlier version of msgapi added (_msgapi_id) is dropped
// at start-up: the engine no longer needs it, and every write paid for it.
func TestEnsureDropsTheExtraIDIndex(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine")
		return
	}
	s := storetest.New(t, things)
	ctx := context.Background()
	if err := store.AddOldIDIndex(ctx, s, "things"); err != nil {
		t.Fatal(err)
	}
	if n, err := store.IndexesNamed(ctx, s, "things", "_msgapi_id"); err != nil || n != 1 {
		t.Fatalf("set-up: %d _msgapi_id indexes (%v), want 1", n, err)
	}
	if err := s.Ensure(ctx, things); err != nil {
		t.Fatal(err)
	}
	if n, err := store.IndexesNamed(ctx, s, "things", "_msgapi_id"); err != nil || n != 0 {
		t.Errorf("%d _msgapi_id indexes after Ensure (%v), want 0", n, err)
	}
}

func TestEnsureIsIdempotentAndReaperDeletesExpired(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	if err := s.Ensure(ctx, things); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	now := time.Now()
	_, err := s.Collection("things").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "old"}, {Key: "expiresAt", Value: now.Add(-time.Minute)}},
		bson.D{{Key: "_id", Value: "new"}, {Key: "expiresAt", Value: now.Add(time.Minute)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reaped()) == 0 {
		t.Logf("store has TTL indexes; the reaper is not needed")
		return
	}
	n, err := s.Reap(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("reaped %d documents, want 1", n)
	}
	left, err := s.Collection("things").CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Errorf("%d documents left, want 1 (the unexpired one)", left)
	}
}

func TestRoundTripCounter(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	before := s.RoundTrips.Total()
	_, _ = s.Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}})
	_ = s.Collection("things").FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Err()
	if got := s.RoundTrips.Total() - before; got != 2 {
		t.Errorf("round trips for one insert and one find = %d, want 2", got)
	}
}

func TestOpenUnreachableFailsFast(t *testing.T) {
	start := time.Now()
	_, err := store.Open(context.Background(), store.Options{URI: "mongodb://127.0.0.1:1/?directConnection=true", ConnectTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %q does not say the store did not answer", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Open took %s against a closed port", d)
	}
}

// A connection string is logged as scheme, hosts, database and replica set
// only: no user, password or other option, whatever the string looks like.
func TestRedact(t *testing.T) {
	const unreadable = "mongodb://(unreadable connection string)"
	tests := []struct{ name, uri, want string }{
		{"password", "mongodb://user:s3cret@db:27017/?replicaSet=rs0", "mongodb://db:27017/?replicaSet=rs0"},
		{"AWS session token", "mongodb://AKIA:s3cret@db1:27017,db2:27017/msgapi?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:s3cret&replicaSet=rs0",
			"mongodb://db1:27017,db2:27017/msgapi?replicaSet=rs0"},
		{"key file password", "mongodb+srv://cluster0.example.net/msgapi?tls=true&tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=s3cret",
			"mongodb+srv://cluster0.example.net/msgapi"},
		{"unix socket", "mongodb://%2Ftmp%2Fmsgapi%2Fmongodb.sock/", "mongodb://%2Ftmp%2Fmsgapi%2Fmongodb.sock/"},
		{"ipv6", "mongodb://[::1]:27017/db", "mongodb://[::1]:27017/db"},
		{"user without password", "mongodb://s3cret@db/", "mongodb://db/"},
		{"unescaped slash in password", "mongodb://user:s3/cret@db/msgapi", unreadable},
		{"unescaped @ in password", "mongodb://user:s3@cret@db/msgapi", unreadable},
		{"? in password, no slash", "mongodb://user:s3?cret@db", unreadable},
		{"@ in an option without credentials", "mongodb://db/?appName=x@s3cret", "mongodb://db/"},
		{"query without slash", "mongodb://db?appName=a@s3cret", unreadable},
		{"replica set with junk", "mongodb://db/?replicaSet=s3cret%20x", "mongodb://db/"},
		{"bad escape in password", "mongodb://user:s3%zzcret@db/", "mongodb://db/"},
		{"fragment", "mongodb://user:pw#s3cret@db/", unreadable},
		{"other scheme", "postgres://user:s3cret@db/", unreadable},
		{"not a URI", "s3cret", unreadable},
		{"empty", "", unreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := store.Redact(tt.uri)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.uri, got, tt.want)
			}
			if strings.Contains(got, "s3") || strings.Contains(got, "cret") {
				t.Errorf("Redact(%q) = %q leaks the secret", tt.uri, got)
			}
		})
	}
}

// A connection string the driver refuses is not quoted back in the error
// (the driver's own message quotes the bad escape in the password).
func TestOpenInvalidURIErrorHasNoSecret(t *testing.T) {
	_, err := store.Open(context.Background(), store.Options{URI: "mongodb://user:s3%zzcret@db/?tlsCertificateKeyFilePassword=s3cret", ConnectTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Open accepted a connection string with a bad escape")
	}
	if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "zz") {
		t.Errorf("error %q quotes the secret", err)
	}
}

// On a replica set every collection writes with majority and reads the
// primary; elsewhere the driver's defaults stand.
func TestReplicaSetWriteConcern(t *testing.T) {
	for _, rs := range []bool{true, false} {
		var o options.DatabaseOptions
		for _, set := range store.DBOptions(rs).List() {
			if err := set(&o); err != nil {
				t.Fatal(err)
			}
		}
		gotMajority := o.WriteConcern != nil && o.WriteConcern.W == "majority"
		if gotMajority != rs {
			t.Errorf("replicaSet=%v: write concern %+v", rs, o.WriteConcern)
		}
		if rs && (o.ReadPreference == nil || o.ReadPreference.Mode() != readpref.PrimaryMode) {
			t.Errorf("replicaSet=%v: read preference %v, want primary", rs, o.ReadPreference)
		}
	}
}

// A pass over a backlog far larger than one SQL statement may bind (the
// engine once deleted every match in one statement and failed with "too
// many SQL variables") deletes all of it, in batches.
func TestReapLargeBacklog(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	now := time.Now()
	n := envInt("REAP_N", reapBacklog)
	start := time.Now()
	docs := make([]any, 0, 1000)
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("d%06d", i)}, {Key: "expiresAt", Value: now.Add(-time.Minute)}})
		if len(docs) == cap(docs) {
			if _, err := s.Collection("things").InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	if _, err := s.Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "live"}, {Key: "expiresAt", Value: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d documents in %s", n, time.Since(start))
	if len(s.Reaped()) == 0 {
		t.Fatal("the store has TTL indexes: this test needs the embedded engine's reaper")
	}
	start = time.Now()
	got, err := s.Reap(ctx, now)
	if err != nil {
		t.Fatalf("reap: %v", err)
	}
	t.Logf("reaped %d documents in %s", got, time.Since(start))
	if got != int64(n) {
		t.Errorf("reaped %d documents, want %d", got, n)
	}
	left, err := s.Collection("things").CountDocuments(ctx, bson.D{})
	if err != nil || left != 1 {
		t.Errorf("%d documents left (%v), want 1: the unexpired one", left, err)
	}
}

// envInt lets a developer size a test by hand (REAP_N=…).
func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

// The embedded engine says what it is, even to a client that attached by
// URI only: its write commands run one at a time.
func TestAttachedClientKnowsTheOneWriter(t *testing.T) {
	s := storetest.New(t, things)
	uri, _ := storetest.URI(t)
	attached, err := store.Open(context.Background(), store.Options{URI: uri, Database: s.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer attached.Close(context.Background())
	if os.Getenv("MSGAPI_TEST_MONGODB_URI") == "" && !attached.OneWriter() {
		t.Error("a client attached to the embedded engine by URI does not know it is FerretDB")
	}
	if os.Getenv("MSGAPI_TEST_MONGODB_URI") != "" && attached.OneWriter() {
		t.Error("MongoDB taken for FerretDB")
	}
}

// RELIABILITY.md finding 3: a process attached to the embedded engine
// starts while the engine's host restarts; the command its start-up was
// running fails (interrupted, or its connection dropped). Start-up tries
// again until its deadline instead of exiting.
func TestEnsureSurvivesAnEngineRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	eng, err := store.StartEmbedded(ctx, store.EmbeddedOptions{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop() })
	attached, err := store.Open(ctx, store.Options{URI: eng.URI(), SQLiteDir: dir, Log: zerolog.Nop(), ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = attached.Close(context.Background()) })

	var restarted sync.Once
	attached.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName != "create" {
			return
		}
		restarted.Do(func() {
			eng.Stop() // the host goes down under the attached process's command
			if eng, err = store.StartEmbedded(ctx, store.EmbeddedOptions{Dir: dir, Log: zerolog.Nop()}); err != nil {
				t.Error(err)
			}
		})
	})
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := attached.Ensure(ectx, things, store.Collection{Name: "others"}); err != nil {
		t.Fatalf("Ensure across an engine restart: %v", err)
	}
	attached.RoundTrips.Before(nil)
	for _, name := range []string{"things", "others"} {
		if _, err := attached.Collection(name).InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil {
			t.Errorf("insert into %s after start-up: %v", name, err)
		}
	}
}

// Only the embedded engine's host runs the expiry reaper: a process attached
// by URI leaves it to the host, which reaps every collection through the
// expiry index it alone can read (collections.go, ReapsHere). On MongoDB
// every process reaps (what TTL indexes do not).
func TestOnlyTheEnginesHostReaps(t *testing.T) {
	host := storetest.New(t, things)
	uri, dir := storetest.URI(t)
	if !host.ReapsHere() {
		t.Error("the engine's host (or a MongoDB client) does not reap")
	}
	attached, err := store.Open(context.Background(), store.Options{URI: uri, Database: host.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer attached.Close(context.Background())
	if err := attached.Ensure(context.Background(), things); err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		if !attached.ReapsHere() {
			t.Error("a second MongoDB client does not reap")
		}
		return
	}
	if attached.ReapsHere() {
		t.Fatal("a process attached to the embedded engine by URI runs a reaper of its own")
	}
	if _, err := attached.Collection("things").InsertOne(context.Background(), bson.D{{Key: "_id", Value: "old"}, {Key: "expiresAt", Value: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { attached.RunReaper(context.Background(), time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the attached process's RunReaper did not return: it is reaping")
	}
	if n := countDocs(t, host, "things"); n != 1 {
		t.Errorf("%d documents left, want the expired one still there (its host's reaper has not run)", n)
	}
	if n, err := host.Reap(context.Background(), time.Now()); err != nil || n != 1 {
		t.Errorf("the host's reaper deleted %d (%v), want the expired document", n, err)
	}
}
