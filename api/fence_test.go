package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/send"
	"github.com/msgapi/msgapi/store"
)

// The six interleavings an outside review found to send one text twice,
// each driven deterministically (stalled store commands, injected clocks, a
// second server with its own store client) and counted at the sender.

// clock is a server's clock: the real one plus an offset a test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time            { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration)   { c.offset.Add(int64(d)) }
func newClock(offset time.Duration) *clock { c := &clock{}; c.Advance(offset); return c }

// stall blocks the first command of st that match accepts, before it is
// sent, until the returned release is called (or the test ends). It returns
// at once; reached is closed when the command is being held.
func stall(t *testing.T, st *store.Store, match func(e *event.CommandStartedEvent) bool) (reached <-chan struct{}, release func()) {
	t.Helper()
	var once sync.Once
	held, gate := make(chan struct{}), make(chan struct{})
	var closeGate sync.Once
	release = func() { closeGate.Do(func() { close(gate) }) }
	st.RoundTrips.Before(func(_ context.Context, e *event.CommandStartedEvent) {
		hit := false
		if match(e) {
			once.Do(func() { hit = true })
		}
		if hit {
			close(held)
			<-gate
		}
	})
	t.Cleanup(func() { release(); st.RoundTrips.Before(nil) })
	return held, release
}

// insertInto matches an insert into the named collection, alone or with
// others (store.InsertCollections).
func insertInto(coll string) func(e *event.CommandStartedEvent) bool {
	return func(e *event.CommandStartedEvent) bool {
		return slices.Contains(store.InsertCollections(e), coll)
	}
}

// updateOf matches a command that updates or replaces a document of the
// named collection, however it travels (an update, or a replace in the
// embedded engine's group command: store.UpdateCollections).
func updateOf(coll string) func(e *event.CommandStartedEvent) bool {
	return func(e *event.CommandStartedEvent) bool {
		return slices.Contains(store.UpdateCollections(e), coll)
	}
}

// async posts body in the background; the answer arrives on the channel.
func async(e *apitest.Env, key, body string, hdr map[string]string) <-chan apitest.Response {
	ch := make(chan apitest.Response, 1)
	go func() { ch <- e.Do(http.MethodPost, "/api/messages", key, body, hdr) }()
	return ch
}

func wait(t *testing.T, ch <-chan apitest.Response) apitest.Response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s")
		return apitest.Response{}
	}
}

func messageID(r apitest.Response) string {
	var v struct {
		Message *struct{ ID string } `json:"message"`
	}
	r.Decode(&v)
	if v.Message == nil {
		return ""
	}
	return v.Message.ID
}

func wantSends(t *testing.T, s *apitest.CountingSender, want int) {
	t.Helper()
	if got := s.Count(); got != want {
		t.Fatalf("the sender saw %d messages, want %d", got, want)
	}
}

const fenceBody = `{"channel":"sms","recipientPhone":"+15550100000","body":"Your appointment is at 3pm"}`

// 1. The reaper read an expired lock, a takeover rewrote it, and the reaper
// then deleted the fresh lock: the next identical request sent again.
func TestFenceReaperRacesTakeover(t *testing.T) {
	clk := newClock(0)
	e := apitest.New(t, apitest.Options{Window: time.Minute, Now: clk.Now})
	if r := e.Send(fenceBody); r.Status != http.StatusCreated {
		t.Fatalf("first send: %d %s", r.Status, r.Body)
	}
	clk.Advance(2 * time.Minute) // the lock has expired; the reaper reads it
	ctx := context.Background()
	scanned := scanExpired(t, e.Store, "message_dedup_locks", clk.Now())
	// The window has passed: the same text is sent again, by design, and
	// the takeover rewrites the lock.
	second := e.Send(fenceBody)
	if second.JSON()["duplicateOnly"] == true {
		t.Fatalf("send after the window was blocked: %s", second.Body)
	}
	// The reaper's pass over what it read before the takeover.
	if _, err := e.Guard.Reap(ctx, clk.Now(), scanned); err != nil {
		t.Fatal(err)
	}
	third := e.Send(fenceBody)
	if third.JSON()["duplicateOnly"] != true || messageID(third) != messageID(second) {
		t.Fatalf("after the reaper pass, a retry was not the duplicate of %s: %s", messageID(second), third.Body)
	}
	wantSends(t, e.Sender, 2)
}

// 2. The same race on idempotency_keys: the reaper deleted the record a
// takeover had just rewritten, and a retry with the key ran again instead
// of replaying.
func TestFenceReaperRacesKeyTakeover(t *testing.T) {
	clk := newClock(0)
	e := apitest.New(t, apitest.Options{Now: clk.Now})
	hdr := map[string]string{"Idempotency-Key": "order-42"}
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, fenceBody, hdr); r.Status != http.StatusCreated {
		t.Fatalf("first send: %d %s", r.Status, r.Body)
	}
	clk.Advance(25 * time.Hour) // the key has expired; the reaper reads it
	ctx := context.Background()
	scanExpired(t, e.Store, "idempotency_keys", clk.Now())
	// A day later the key is new: it runs and sends again, by design.
	first := e.Do(http.MethodPost, "/api/messages", e.Key, fenceBody, hdr)
	if first.Status != http.StatusOK || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("send a day later: %d %s", first.Status, first.Body)
	}
	// The reaper runs its pass over what it read before that request, with
	// every expired record it owns.
	if _, err := e.Store.Reap(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	retry := e.Do(http.MethodPost, "/api/messages", e.Key, fenceBody, hdr)
	if retry.Header.Get("Idempotent-Replayed") != "true" || string(retry.Body) != string(first.Body) {
		t.Fatalf("retry with the key after the reaper pass: %d replayed=%q %s, want the replay of %s",
			retry.Status, retry.Header.Get("Idempotent-Replayed"), retry.Body, first.Body)
	}
	wantSends(t, e.Sender, 2)
}

// 3. A holder that stalls before writing its message for longer than the
// lease is judged crashed by a duplicate in another process, which takes
// over and sends; the holder then resumes. It must not send.
func TestFenceSlowHolderTakenOver(t *testing.T) {
	a := apitest.New(t, apitest.Options{DedupLease: 300 * time.Millisecond, DedupWait: 5 * time.Second})
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender,
		DedupLease: 300 * time.Millisecond, DedupWait: 5 * time.Second})
	held, release := stall(t, a.Store, insertInto("messages"))
	slow := async(a, a.Key, fenceBody, nil)
	<-held // a won the lock and stalls on its message insert
	taker := b.Do(http.MethodPost, "/api/messages", a.Key, fenceBody, nil)
	if taker.Status != http.StatusOK || taker.JSON()["duplicateOnly"] == true {
		t.Fatalf("duplicate after the holder's lease: %d %s, want a send", taker.Status, taker.Body)
	}
	release()
	stalled := wait(t, slow)
	if got := stalled.JSON(); got["pending"] != true || got["message"] != nil {
		t.Fatalf("the fenced holder answered %d %s, want the pending answer", stalled.Status, stalled.Body)
	}
	if stalled.Header.Get("Retry-After") == "" {
		t.Error("the fenced holder's answer has no Retry-After")
	}
	wantSends(t, a.Sender, 1)
	if !containsEvent(a.Logs.String(), "message.api.send_fenced") {
		t.Error("no send_fenced event from the fenced holder")
	}
	// Its retry gets the taker's message.
	if r := a.Send(fenceBody); r.JSON()["duplicateOnly"] != true || messageID(r) != messageID(taker) {
		t.Fatalf("retry: %s, want the duplicate of %s", r.Body, messageID(taker))
	}
	wantSends(t, a.Sender, 1)
}

// 3b. Clock skew of more than a lease between two processes does the same
// with no stall at all: a storm split across them delivers once.
func TestFenceStormAcrossSkewedClocks(t *testing.T) {
	lease := 500 * time.Millisecond
	a := apitest.New(t, apitest.Options{DedupLease: lease})
	a.Sender.Delay = 50 * time.Millisecond
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender,
		DedupLease: lease, Now: newClock(3 * lease).Now})
	answers := storm(t, []*apitest.Env{a, b}, a.Key, fenceBody, 40)
	ids := map[string]int{}
	for i, r := range answers {
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("answer %d: %d %s", i, r.Status, r.Body)
		}
		if id := messageID(r); id != "" {
			ids[id]++
		}
	}
	wantSends(t, a.Sender, 1)
	if len(ids) != 1 {
		t.Errorf("answers name %d messages, want 1: %v", len(ids), ids)
	}
	// Every caller that retries gets the one message.
	for _, env := range []*apitest.Env{a, b} {
		if r := env.Do(http.MethodPost, "/api/messages", a.Key, fenceBody, nil); r.JSON()["duplicateOnly"] != true || ids[messageID(r)] == 0 {
			t.Errorf("retry: %s, want the duplicate of the delivered message", r.Body)
		}
	}
	wantSends(t, a.Sender, 1)
}

// 4. A keyed request whose process dies after the send stage leaves its key
// in progress; a retry after the key's lease and after the 15-minute window
// ran the request again and sent again. The key promises 24 h.
func TestFenceKeyRetriedAfterWindow(t *testing.T) {
	aClock, bClock := newClock(0), newClock(0)
	a := apitest.New(t, apitest.Options{Now: aClock.Now})
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender, Now: bClock.Now})
	hdr := map[string]string{"Idempotency-Key": "order-7-reminder"}
	// a's process "dies" once the message is sent: its response is never
	// stored (the completion's write of the key record never returns).
	held, _ := stall(t, a.Store, updateOf("idempotency_keys"))
	async(a, a.Key, fenceBody, hdr)
	<-held
	wantSends(t, a.Sender, 1)

	bClock.Advance(20 * time.Minute) // past the key's lease and the dedup window
	retry := b.Do(http.MethodPost, "/api/messages", a.Key, fenceBody, hdr)
	if retry.Status != http.StatusCreated || retry.JSON()["status"] != "sent" {
		t.Fatalf("retry with the key after the window: %d %s, want the first send's 201", retry.Status, retry.Body)
	}
	wantSends(t, a.Sender, 1)
	again := b.Do(http.MethodPost, "/api/messages", a.Key, fenceBody, hdr)
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(retry.Body) {
		t.Fatalf("second retry: replayed=%q %s, want the same bytes as %s", again.Header.Get("Idempotent-Replayed"), again.Body, retry.Body)
	}
	wantSends(t, a.Sender, 1)
}

// 4b. Under a key, a duplicate answer is the request's outcome for 24 h: a
// retry after the process died and after the window answers it again
// instead of sending.
func TestFenceKeyedDuplicateRetriedAfterWindow(t *testing.T) {
	aClock, bClock := newClock(0), newClock(0)
	a := apitest.New(t, apitest.Options{Now: aClock.Now})
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender, Now: bClock.Now})
	orig := a.Send(fenceBody)
	hdr := map[string]string{"Idempotency-Key": "dup-under-key"}
	held, _ := stall(t, a.Store, updateOf("idempotency_keys"))
	async(a, a.Key, fenceBody, hdr)
	<-held // answered as a duplicate; the process dies before storing it
	bClock.Advance(20 * time.Minute)
	retry := b.Do(http.MethodPost, "/api/messages", a.Key, fenceBody, hdr)
	if retry.JSON()["duplicateOnly"] != true || messageID(retry) != messageID(orig) {
		t.Fatalf("retry with the key after the window: %d %s, want the duplicate of %s", retry.Status, retry.Body, messageID(orig))
	}
	wantSends(t, a.Sender, 1)
}

// 5. An operator deletes the lock while a duplicate waits in another
// process and the holder is with the provider: the waiter inserted the lock
// and sent too.
func TestFenceOperatorDeleteWhileWaiting(t *testing.T) {
	a := apitest.New(t, apitest.Options{DedupWait: 10 * time.Second})
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender, DedupWait: 10 * time.Second})
	a.Sender.Delay = 1500 * time.Millisecond
	holder := async(a, a.Key, fenceBody, nil)
	lockID := waitLock(t, a)
	waiter := async(b, a.Key, fenceBody, nil)
	time.Sleep(200 * time.Millisecond) // b is polling a's lock
	if r := a.Do(http.MethodDelete, "/api/dedup-locks/"+lockID, a.Key, "", nil); r.Status != http.StatusOK {
		t.Fatalf("delete lock: %d %s", r.Status, r.Body)
	}
	h, w := wait(t, holder), wait(t, waiter)
	if w.JSON()["duplicateOnly"] != true || messageID(w) != messageID(h) {
		t.Fatalf("waiter answered %s, want the duplicate of %s", w.Body, messageID(h))
	}
	wantSends(t, a.Sender, 1)
}

// 5b. The same delete while the holder has not written its message yet:
// the holder is fenced and the waiter sends, once.
func TestFenceOperatorDeleteFencesUnwrittenHolder(t *testing.T) {
	a := apitest.New(t, apitest.Options{DedupWait: 10 * time.Second})
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender, DedupWait: 10 * time.Second})
	held, release := stall(t, a.Store, insertInto("messages"))
	holder := async(a, a.Key, fenceBody, nil)
	<-held
	lockID := waitLock(t, a)
	waiter := async(b, a.Key, fenceBody, nil)
	time.Sleep(200 * time.Millisecond)
	if r := b.Do(http.MethodDelete, "/api/dedup-locks/"+lockID, a.Key, "", nil); r.Status != http.StatusOK {
		t.Fatalf("delete lock: %d %s", r.Status, r.Body)
	}
	w := wait(t, waiter)
	release()
	h := wait(t, holder)
	if h.JSON()["pending"] != true {
		t.Errorf("fenced holder answered %s, want pending", h.Body)
	}
	if w.JSON()["duplicateOnly"] == true || messageID(w) == "" {
		t.Errorf("waiter answered %s, want its own send", w.Body)
	}
	wantSends(t, a.Sender, 1)
}

// 6. The key's lease ends during a slow send: a retry took the key over,
// got the guard's duplicate answer (status sending) and stored it, and the
// key replayed that for 24 h instead of the first 201.
func TestFenceKeyLeaseEndsDuringSlowSend(t *testing.T) {
	clk := newClock(0)
	e := apitest.New(t, apitest.Options{IdemLease: time.Second, Now: clk.Now})
	e.Sender.Delay = 1500 * time.Millisecond
	hdr := map[string]string{"Idempotency-Key": "slow-send"}
	first := async(e, e.Key, fenceBody, hdr)
	waitFor(t, func() bool { return e.CountDocs("messages") == 1 })
	clk.Advance(2 * time.Second) // the key's lease has ended; the send has not
	retry := e.Do(http.MethodPost, "/api/messages", e.Key, fenceBody, hdr)
	if retry.Status != http.StatusConflict || retry.Header.Get("Retry-After") == "" {
		t.Fatalf("retry during the slow send: %d %s, want 409 with Retry-After", retry.Status, retry.Body)
	}
	f := wait(t, first)
	if f.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", f.Status, f.Body)
	}
	later := e.Do(http.MethodPost, "/api/messages", e.Key, fenceBody, hdr)
	if later.Header.Get("Idempotent-Replayed") != "true" || string(later.Body) != string(f.Body) || later.Status != f.Status {
		t.Fatalf("retry after the send: %d %s, want the replay of %d %s", later.Status, later.Body, f.Status, f.Body)
	}
	wantSends(t, e.Sender, 1)
}

// scanExpired reads, as the reaper's scan does, the documents of coll
// expired at now, and wants exactly one.
func scanExpired(t *testing.T, st *store.Store, coll string, now time.Time) []bson.Raw {
	t.Helper()
	ctx := context.Background()
	cur, err := st.Collection(coll).Find(ctx, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}})
	if err != nil {
		t.Fatal(err)
	}
	var scanned []bson.Raw
	for cur.Next(ctx) {
		scanned = append(scanned, append(bson.Raw(nil), cur.Current...))
	}
	if len(scanned) != 1 {
		t.Fatalf("the reaper's scan of %s found %d expired documents, want 1", coll, len(scanned))
	}
	return scanned
}

// waitLock waits for e's workspace to hold one dedup lock and returns its id.
func waitLock(t *testing.T, e *apitest.Env) string {
	t.Helper()
	var id string
	waitFor(t, func() bool {
		var l struct {
			ID string `bson:"_id"`
		}
		if err := e.Store.Collection("message_dedup_locks").FindOne(context.Background(), bson.D{}).Decode(&l); err != nil {
			return false
		}
		id = l.ID
		return true
	})
	return id
}

func containsEvent(logs, name string) bool {
	return strings.Contains(logs, `"event":"`+name+`"`)
}

// R2 (outside review): a holder whose own message insert was fenced does not
// release its lock. Whoever fenced it owns the takeover (a guard taker
// between its fence and its claim, or an Idempotency-Key takeover, which
// fences without claiming the lock); a release then claimed the generation
// and deleted the lock under that taker. Both doubles of the chaos run began
// so. Before the fix the fenced holder's Release left a "released" claim and
// no lock; now the lock still names the fenced id, which the next identical
// request takes over at once (a tombstone needs no lease).
func TestFencedHolderDoesNotRelease(t *testing.T) {
	a := apitest.New(t, apitest.Options{})
	var (
		first      atomic.Bool
		held, gate = make(chan struct{}), make(chan struct{})
		msgID      string
	)
	a.Store.RoundTrips.Before(func(_ context.Context, e *event.CommandStartedEvent) {
		if !insertInto("messages")(e) || !first.CompareAndSwap(false, true) {
			return
		}
		if docs := store.InsertDocuments(e, "messages"); len(docs) > 0 {
			msgID = docs[0].Lookup("_id").StringValue()
		}
		close(held)
		<-gate
	})
	t.Cleanup(func() { a.Store.RoundTrips.Before(nil) })
	slow := async(a, a.Key, fenceBody, nil)
	<-held // the holder won the lock and stalls on its message insert
	if msgID == "" {
		t.Fatal("no message id in the stalled insert")
	}
	// Someone declares it gone: a tombstone under its id, no claim yet.
	won, err := send.Commits{Messages: messages.NewStore(a.Store)}.Fence(context.Background(), "test", msgID)
	if err != nil || len(won) != 1 || !won[0] {
		t.Fatalf("fence = %v, %v", won, err)
	}
	close(gate)
	if got := wait(t, slow).JSON(); got["pending"] != true {
		t.Fatalf("the fenced holder answered %v, want the pending answer", got)
	}
	if n := a.CountDocs("message_dedup_takeovers"); n != 0 {
		t.Errorf("%d takeover claims after the fenced holder answered, want 0: it must not release", n)
	}
	var lock struct {
		MessageID string `bson:"messageId"`
	}
	if err := a.Store.Collection("message_dedup_locks").FindOne(context.Background(), bson.D{}).Decode(&lock); err != nil || lock.MessageID != msgID {
		t.Fatalf("lock %+v (%v), want it kept naming the fenced %s", lock, err, msgID)
	}
	// The next identical request takes the fenced lock over and sends.
	if r := a.Send(fenceBody); r.JSON()["duplicateOnly"] == true || r.JSON()["status"] != "sent" {
		t.Fatalf("next request: %s, want a send", r.Body)
	}
	wantSends(t, a.Sender, 1)
}
