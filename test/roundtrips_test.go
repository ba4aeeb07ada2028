package test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// Store round trips per request are exact, so their budgets are tests, not
// benchmarks: each path below fails the build when it costs more.

// delta runs f and returns the commands it sent to the store, by name.
func delta(st *store.Store, f func()) (int64, map[string]int64) {
	before, beforeBy := st.RoundTrips.Total(), st.RoundTrips.ByName()
	f()
	after := st.RoundTrips.ByName()
	by := map[string]int64{}
	for k, v := range after {
		if d := v - beforeBy[k]; d != 0 {
			by[k] = d
		}
	}
	return st.RoundTrips.Total() - before, by
}

// deltaInto is delta, and the collections that f's insert commands wrote
// into (store.InsertCollections), sorted. The inserts one request makes at
// once (a message and its listing entries) may share a command on the
// embedded engine (store/batch.go: one command for every collection), so a
// budget counts at most so many insert commands, and exactly these
// collections.
func deltaInto(st *store.Store, f func()) (int64, map[string]int64, []string) {
	var (
		mu    sync.Mutex
		colls = map[string]bool{}
	)
	st.RoundTrips.Before(func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range store.InsertCollections(e) {
			colls[c] = true
		}
	})
	defer st.RoundTrips.Before(nil)
	n, by := delta(st, f)
	mu.Lock()
	defer mu.Unlock()
	return n, by, slices.Sorted(maps.Keys(colls))
}

func TestRoundTripBudgets(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	first := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"first, creates the lead"}`)
	if first.Status != http.StatusCreated {
		t.Fatalf("first send: %d %s", first.Status, first.Body)
	}
	e.Workspaces.Wait() // the key's lastUsedAt, written off the request path

	t.Run("authentication on a warm cache", func(t *testing.T) {
		// An invalid body is refused after authentication and before any
		// store work: the whole request must cost nothing.
		n, by := delta(e.Store, func() {
			if r := e.Send(`{"channel":"fax"}`); r.Status != http.StatusBadRequest {
				t.Fatalf("status %d", r.Status)
			}
		})
		if n != 0 {
			t.Errorf("%d round trips %v, want 0", n, by)
		}
	})

	t.Run("new message to a known lead", func(t *testing.T) {
		n, by, colls := deltaInto(e.Store, func() {
			if r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"second"}`); r.Status != http.StatusOK {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		})
		// One read, three documents (store.Prefetch): the consent check,
		// the lock (none: so this request inserts it), the lead (the
		// conversation is known to this process). Inserts: the lock, the
		// message (the commit point) with the listing index entries beside
		// it (messages/index.go), the outcome (messages/outcome.go).
		// Nothing is updated: every write is an insert, which concurrent
		// requests share (store.Batch).
		if n > 5 || by["find"] != 1 {
			t.Errorf("%d round trips %v, budget 5, one read", n, by)
		}
		if by["insert"] < 3 || by["insert"] > 4 || by["update"] != 0 {
			t.Errorf("writes %v, want 4 inserts (lock, message, listing index, outcome; the message and its index may share one) and no update", by)
		}
		if want := []string{"message_dedup_locks", "message_index", "message_outcomes", "messages"}; !slices.Equal(colls, want) {
			t.Errorf("inserted into %v, want %v", colls, want)
		}
		t.Logf("new message to a known lead: %d round trips %v", n, by)
	})

	t.Run("duplicate with the sibling present", func(t *testing.T) {
		n, by := delta(e.Store, func() {
			r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"second"}`)
			if r.JSON()["duplicateOnly"] != true {
				t.Fatalf("not a duplicate: %s", r.Body)
			}
		})
		// Two reads: the consent check, the lock (held: so no insert) and
		// the lead in one (store.Prefetch), then the sibling (as its
		// outcome left it).
		if n > 2 {
			t.Errorf("%d round trips %v, budget 2", n, by)
		}
		if by["insert"] != 0 || by["update"] != 0 || by["delete"] != 0 {
			t.Errorf("writes %v, want none", by)
		}
		t.Logf("duplicate: %d round trips %v", n, by)
	})

	t.Run("Idempotency-Key replay", func(t *testing.T) {
		body := `{"channel":"sms","recipientPhone":"+15550100000","body":"third"}`
		hdr := map[string]string{"Idempotency-Key": "budget-1"}
		e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
		n, by := delta(e.Store, func() {
			r := e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
			if r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("not a replay: %d %s", r.Status, r.Body)
			}
		})
		if n > 1 {
			t.Errorf("%d round trips %v, budget 1", n, by)
		}
	})
	t.Run("keyed send", func(t *testing.T) {
		// Read, claim, the send's 5, then the completion: one write,
		// conditional on the claim (idempotency/record.go).
		// Fencing adds nothing here: the claim names the message id it
		// allocated anyway.
		n, by := delta(e.Store, func() {
			r := e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"sms","recipientPhone":"+15550100000","body":"fourth"}`,
				map[string]string{"Idempotency-Key": "budget-2"})
			if r.Status != http.StatusOK {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		})
		if n > 8 {
			t.Errorf("%d round trips %v, budget 8", n, by)
		}
		t.Logf("keyed send: %d round trips %v", n, by)
	})
	t.Run("send to a suppressed recipient", func(t *testing.T) {
		if _, _, err := e.Consent.Suppress(t.Context(), e.WSID, "+15550100000", "api", consent.Evidence{}); err != nil {
			t.Fatal(err)
		}
		// One read for the consent check (it finds the suppression) and
		// the lead (the conversation is known to this process), the
		// message insert, its copy as its outcome (final at birth, for
		// one-read reads), the listing index insert: no lock, no
		// provider, no update.
		n, by, colls := deltaInto(e.Store, func() {
			r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"to someone who said STOP"}`)
			if r.Status != http.StatusOK || r.JSON()["status"] != "suppressed" {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		})
		if n > 4 || by["find"] != 1 || by["insert"] < 1 || by["insert"] > 3 || by["update"] != 0 || by["delete"] != 0 {
			t.Errorf("%d round trips %v, budget 4, one read, writes: the message, its outcome and the listing index inserts only", n, by)
		}
		if want := []string{"message_index", "message_outcomes", "messages"}; !slices.Equal(colls, want) {
			t.Errorf("inserted into %v, want %v", colls, want)
		}
		t.Logf("suppressed: %d round trips %v", n, by)
		if _, err := e.Consent.Lift(t.Context(), e.WSID, "+15550100000", "api", consent.Evidence{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("list messages, first page", func(t *testing.T) {
		// Four messages are stored; limit 2 reads the head probe, then
		// limit+1 entries in one read and limit+1 messages, as their
		// outcomes left them, in another (the extra one tells hasMore).
		n, by := delta(e.Store, func() {
			r := e.Do(http.MethodGet, "/api/messages?limit=2", e.Key, "", nil)
			if r.Status != http.StatusOK || r.JSON()["hasMore"] != true {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
		if n != 3 || by["find"] != n {
			t.Errorf("%d round trips %v, want 3 reads", n, by)
		}
	})

	t.Run("lead by phone", func(t *testing.T) {
		n, by := delta(e.Store, func() {
			if r := e.Do(http.MethodGet, "/api/leads?phone=%2B15550100000", e.Key, "", nil); r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
		if n != 1 {
			t.Errorf("%d round trips %v, want 1", n, by)
		}
	})
	if got := e.Sender.Count(); got != 4 {
		t.Errorf("sender saw %d messages, want 4", got)
	}
}

// Keyed sends made at once: each completion (the conditional write that
// stores the response under the key) lands exactly once, and on the
// embedded engine they ride in the group commands of the one writer
// (store.Batch.ReplaceOne) instead of costing it a command each.
func TestKeyedCompletionsShareCommands(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	const n = 32
	var (
		mu                 sync.Mutex
		replaces, carriers int
	)
	e.Store.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		k := 0
		for _, c := range store.UpdateCollections(ev) {
			if c == "idempotency_keys" {
				k++
			}
		}
		if k > 0 {
			mu.Lock()
			replaces += k
			carriers++
			mu.Unlock()
		}
	})
	t.Cleanup(func() { e.Store.RoundTrips.Before(nil) })
	body := func(i int) string {
		return fmt.Sprintf(`{"channel":"sms","recipientPhone":"+155501%05d","body":"keyed %d"}`, i, i)
	}
	key := func(i int) map[string]string {
		return map[string]string{"Idempotency-Key": fmt.Sprintf("together-%d", i)}
	}
	answers := make([]apitest.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = e.Do(http.MethodPost, "/api/messages", e.Key, body(i), key(i))
		})
	}
	close(start)
	wg.Wait()
	e.Store.RoundTrips.Before(nil)
	for i, r := range answers {
		if r.Status != http.StatusCreated {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
		}
	}
	if got := e.Sender.Count(); got != n {
		t.Errorf("sender saw %d messages, want %d", got, n)
	}
	mu.Lock()
	t.Logf("%d completions in %d write commands", replaces, carriers)
	if replaces != n {
		t.Errorf("%d completions written, want %d (one per keyed send)", replaces, n)
	}
	if _, dir := storetest.URI(t); dir != "" && carriers >= n {
		t.Errorf("%d completions took %d commands: on the embedded engine they should share", replaces, carriers)
	}
	mu.Unlock()
	for i := range n {
		r := e.Do(http.MethodPost, "/api/messages", e.Key, body(i), key(i))
		if r.Header.Get("Idempotent-Replayed") != "true" || r.Status != answers[i].Status || string(r.Body) != string(answers[i].Body) {
			t.Errorf("retry %d: %d replayed=%q %s; want the stored answer %d %s", i, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, answers[i].Status, answers[i].Body)
		}
	}
}
