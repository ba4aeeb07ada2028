package guard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// messagesColl is the tests' message table. It is a real collection read by
// _id, like the api's, so that round-trip counts include the sibling read.
var messagesColl = store.Collection{Name: "messages"}

type messageDoc struct {
	ID        string    `bson:"_id"`
	Status    string    `bson:"status"`
	CreatedAt time.Time `bson:"createdAt"`
}

// table is the message table as seen through one store (one process).
type table struct{ coll *mongo.Collection }

func (tb table) write(ctx context.Context, id, status string) error {
	_, err := tb.coll.InsertOne(ctx, messageDoc{ID: id, Status: status, CreatedAt: time.Now()})
	return err
}

func (tb table) sibling(ctx context.Context, id string) (Sibling, bool, error) {
	var m messageDoc
	err := tb.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&m)
	if store.IsNotFound(err) {
		return Sibling{}, false, nil
	}
	if err != nil {
		return Sibling{}, false, err
	}
	return Sibling{ID: m.ID, Status: m.Status, CreatedAt: m.CreatedAt, Doc: m,
		Tombstone: m.Status == tombstone, Refused: m.Status == "failed"}, true, nil
}

// tombstone is the tests' status of a fenced message id.
const tombstone = "tombstone"

// fence inserts tombstones, as the api's message store does.
func (tb table) fence(ctx context.Context, reason string, ids ...string) ([]bool, error) {
	won := make([]bool, len(ids))
	for i, id := range ids {
		_, err := tb.coll.InsertOne(ctx, messageDoc{ID: id, Status: tombstone, CreatedAt: time.Now()})
		switch {
		case err == nil:
			won[i] = true
		case !store.IsDuplicateKey(err):
			return nil, err
		}
	}
	return won, nil
}

// env is one test's store, message table and captured request log.
type env struct {
	t    *testing.T
	s    *store.Store
	msgs table
	logs *syncBuffer
	ctx  context.Context // carries the request logger, as the api's does
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := storetest.New(t, append([]store.Collection{messagesColl}, Collections...)...)
	logs := &syncBuffer{}
	log := zerolog.New(logs).With().Str("requestId", "req_test").Logger()
	return &env{t: t, s: s, msgs: table{s.Collection(messagesColl.Name)}, logs: logs, ctx: log.WithContext(context.Background())}
}

// guard returns a guard on the env's store; o may set everything else.
func (e *env) guard(o Options) *Guard {
	if o.Store == nil {
		o.Store = e.s
	}
	tb := table{o.Store.Collection(messagesColl.Name)}
	if o.Sibling == nil {
		o.Sibling = tb.sibling
	}
	if o.Fence == nil {
		o.Fence = tb.fence
	}
	return New(o)
}

// secondProcess opens another store on the same database, as a second
// msgapi process would.
func (e *env) secondProcess() *store.Store {
	e.t.Helper()
	uri, dir := storetest.URI(e.t)
	s, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: e.s.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		e.t.Fatalf("open second store: %v", err)
	}
	e.t.Cleanup(func() { _ = s.Client.Disconnect(context.Background()) })
	return s
}

func (e *env) lock(lockID string) (lockDoc, bool) {
	e.t.Helper()
	var l lockDoc
	err := e.s.Collection(locksName).FindOne(context.Background(), store.ByID(lockID)).Decode(&l)
	if store.IsNotFound(err) {
		return l, false
	}
	if err != nil {
		e.t.Fatalf("read lock: %v", err)
	}
	return l, true
}

func (e *env) write(id, status string) {
	e.t.Helper()
	if err := e.msgs.write(context.Background(), id, status); err != nil {
		e.t.Fatalf("write message %s: %v", id, err)
	}
}

func (e *env) roundTrips() int64 { return e.s.RoundTrips.Total() }

// events returns the captured event lines named name.
func (e *env) events(name string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(e.logs.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			e.t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if line["event"] == name {
			out = append(out, line)
		}
	}
	return out
}

// request plays the api's part for one request: Acquire and, when it won,
// write the message after writeAfter and call Written.
func (e *env) request(g *Guard, tb table, k Key, writeAfter time.Duration) (Decision, error) {
	return e.requestThen(g, tb, k, func() error { time.Sleep(writeAfter); return nil })
}

// requestThen is request with the winner running beforeWrite before it
// writes its message.
func (e *env) requestThen(g *Guard, tb table, k Key, beforeWrite func() error) (Decision, error) {
	id := msgapi.NewID("msg")
	d, err := g.Acquire(e.ctx, k, id)
	if err != nil || d.Outcome != Won {
		return d, err
	}
	if err := beforeWrite(); err != nil {
		return d, err
	}
	if err := tb.write(context.Background(), id, "sent"); err != nil {
		return d, err
	}
	g.Written(id)
	return d, nil
}

// race runs f n times on goroutines released together by a barrier.
func race(n int, f func(i int) (Decision, error)) ([]Decision, []error) {
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		ds    = make([]Decision, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ds[i], errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return ds, errs
}

// oneWinner checks that exactly one decision is Won, that every other one
// is Duplicate or Pending naming the winner's message, and returns the
// winner's index.
func oneWinner(t *testing.T, ds []Decision, errs []error) int {
	t.Helper()
	winner, outcomes := -1, map[Outcome]int{}
	for i, d := range ds {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		outcomes[d.Outcome]++
		if d.Outcome == Won {
			winner = i
		}
	}
	modes := map[string]int{}
	for _, d := range ds {
		modes[d.Outcome.String()+"/"+d.Mode]++
	}
	t.Logf("decisions: %v", modes)
	if outcomes[Won] != 1 {
		t.Fatalf("outcomes %v: want exactly 1 winner (1 send)", outcomes)
	}
	for i, d := range ds {
		if i == winner {
			continue
		}
		if d.Outcome != Duplicate && d.Outcome != Pending {
			t.Errorf("request %d: outcome %v, want duplicate or pending", i, d.Outcome)
		}
		if d.MessageID != ds[winner].MessageID {
			t.Errorf("request %d (%v): names message %s, want the winner's %s", i, d.Outcome, d.MessageID, ds[winner].MessageID)
		}
		if d.Outcome == Duplicate && (d.Sibling == nil || d.Sibling.ID != ds[winner].MessageID || d.Sibling.Doc == nil) {
			t.Errorf("request %d: sibling %+v, want the winner's message with its document", i, d.Sibling)
		}
	}
	return winner
}

// waitFor spins until cond holds, or fails the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
