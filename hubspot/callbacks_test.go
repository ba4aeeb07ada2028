package hubspot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// hubAPI answers each completion with answer and counts them by callback.
type hubAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  map[string]int
	answer int
}

func newHubAPI(t *testing.T, answer int) *hubAPI {
	h := &hubAPI{calls: map[string]int{}, answer: answer}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls[r.URL.Path]++
		h.mu.Unlock()
		w.WriteHeader(h.answer)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hubAPI) count(callbackID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls["/automation/v4/actions/callbacks/"+callbackID+"/complete"]
}

func setup(t *testing.T, answer int, now func() time.Time) (*Callbacks, *hubAPI, *store.Store) {
	st := storetest.New(t, append(Collections, messages.Collections...)...)
	h := newHubAPI(t, answer)
	cb := New(Options{Store: st, Messages: messages.NewStore(st), APIBase: h.srv.URL, Log: zerolog.Nop(), Now: now, Timeout: time.Second,
		Token: func(context.Context, string) (string, error) { return "token", nil }})
	return cb, h, st
}

func putMessage(t *testing.T, st *store.Store, id, status string) {
	t.Helper()
	if _, err := st.Collection("messages").UpdateOne(context.Background(), store.ByID(id),
		bson.D{{Key: "$set", Value: bson.D{{Key: "workspaceId", Value: "ws_a"}, {Key: "status", Value: status}}}},
		optionsUpsert()); err != nil {
		t.Fatal(err)
	}
}

func pending(t *testing.T, st *store.Store) int64 {
	n, err := st.Collection(collCallbacks).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A BLOCKed execution waits while its message is sending, is completed
// once it is final, and is gone after HubSpot's 204; a repeat of Block
// (HubSpot retried the call) records nothing new.
func TestCallbackWaitsThenCompletesOnce(t *testing.T) {
	cb, h, st := setup(t, http.StatusNoContent, nil)
	ctx := context.Background()
	putMessage(t, st, "msg_1", messages.StatusSending)
	for range 2 {
		if err := cb.Block(ctx, "ws_a", "cb-1", "msg_1"); err != nil {
			t.Fatal(err)
		}
	}
	cb.pass(ctx)
	if n := h.count("cb-1"); n != 0 {
		t.Fatalf("completed %d times while the message was sending", n)
	}
	putMessage(t, st, "msg_1", messages.StatusSent)
	_, _ = st.Collection(collCallbacks).UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "dueAt", Value: time.Now().Add(-time.Second)}}}})
	cb.pass(ctx)
	cb.pass(ctx)
	if n := h.count("cb-1"); n != 1 || pending(t, st) != 0 {
		t.Errorf("%d completions, %d still waiting; want 1 and 0", n, pending(t, st))
	}
}

// A 4xx other than 429 is final: one call, nothing left to retry.
func TestCallbackRefusedIsFinal(t *testing.T) {
	cb, h, st := setup(t, http.StatusBadRequest, nil)
	ctx := context.Background()
	putMessage(t, st, "msg_1", messages.StatusFailed)
	if err := cb.Block(ctx, "ws_a", "cb-1", "msg_1"); err != nil {
		t.Fatal(err)
	}
	cb.pass(ctx)
	cb.pass(ctx)
	if n := h.count("cb-1"); n != 1 || pending(t, st) != 0 {
		t.Errorf("%d calls, %d still waiting; want 1 and 0", n, pending(t, st))
	}
}

// A claim whose process died mid-call (older than twice the timeout)
// lets the next attempt go; a fresh claim of another process does not.
func TestDeadClaimLetsTheNextAttemptGo(t *testing.T) {
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cb, h, st := setup(t, http.StatusNoContent, now)
	ctx := context.Background()
	putMessage(t, st, "msg_1", messages.StatusSent)
	if err := cb.Block(ctx, "ws_a", "cb-1", "msg_1"); err != nil {
		t.Fatal(err)
	}
	// Another process claimed attempt 1 just now.
	id := callbackDocID("ws_a", "cb-1")
	if _, err := st.Collection(collClaims).InsertOne(ctx, claim{ID: id + ":1", At: now().UTC().Truncate(time.Millisecond), ExpiresAt: now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cb.pass(ctx)
	if n := h.count("cb-1"); n != 0 {
		t.Fatalf("%d calls while another process holds a fresh claim", n)
	}
	mu.Lock()
	clock = clock.Add(3 * time.Second) // past twice the 1 s timeout: its claimer died
	mu.Unlock()
	cb.pass(ctx) // attempt 2 becomes due
	cb.pass(ctx) // and is made
	if n := h.count("cb-1"); n != 1 || pending(t, st) != 0 {
		t.Errorf("%d calls, %d still waiting after the dead claim; want 1 and 0", n, pending(t, st))
	}
}

func optionsUpsert() *options.UpdateOneOptionsBuilder { return options.UpdateOne().SetUpsert(true) }
