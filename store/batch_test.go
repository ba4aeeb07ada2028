package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// together runs f(0) … f(n-1) at once, released together by a barrier,
// and returns when all have returned.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// insertTogether runs n inserts through b, released together, and returns
// each one's error.
func insertTogether(t *testing.T, b *store.Batch, n int, doc func(i int) any) []error {
	t.Helper()
	errs := make([]error, n)
	together(n, func(i int) { errs[i] = b.InsertOne(context.Background(), doc(i)) })
	return errs
}

func countDocs(t *testing.T, s *store.Store, coll string) int64 {
	t.Helper()
	n, err := s.Collection(coll).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Concurrent inserts of distinct documents all land, in fewer commands
// than inserts: group commit.
func TestBatchConcurrentInsertsAllLandInFewerCommands(t *testing.T) {
	s := storetest.New(t, things)
	b := s.Batch("things")
	const n = 64
	before := s.RoundTrips.ByName()["insert"]
	errs := insertTogether(t, b, n, func(i int) any { return bson.D{{Key: "_id", Value: fmt.Sprintf("d%d", i)}} })
	for i, err := range errs {
		if err != nil {
			t.Errorf("insert %d: %v", i, err)
		}
	}
	commands := s.RoundTrips.ByName()["insert"] - before
	if got := countDocs(t, s, "things"); got != n {
		t.Errorf("documents stored: got %d, want %d", got, n)
	}
	if commands >= n {
		t.Errorf("insert commands: got %d for %d concurrent inserts, want fewer (batched)", commands, n)
	}
	t.Logf("%d concurrent inserts in %d insert commands", n, commands)
}

// The race every guard rests on, through the batch: of many concurrent
// inserts of one _id exactly one wins and every other gets a duplicate-key
// error, whether they share a command or not; the collection holds one
// document, written by the winner.
func TestBatchOneWinnerPerID(t *testing.T) {
	s := storetest.New(t, things)
	b := s.Batch("things")
	for round := range 5 {
		const n = 24
		id := fmt.Sprintf("k%d", round)
		// Half the inserts are of the contested _id, half of their own, so
		// the contested ones travel in batches with others.
		errs := insertTogether(t, b, n, func(i int) any {
			if i%2 == 0 {
				return bson.D{{Key: "_id", Value: id}, {Key: "by", Value: i}}
			}
			return bson.D{{Key: "_id", Value: fmt.Sprintf("own-%d-%d", round, i)}}
		})
		won, winner := 0, -1
		for i, err := range errs {
			switch {
			case i%2 == 1 && err != nil:
				t.Errorf("round %d: own insert %d: %v", round, i, err)
			case i%2 == 1:
			case err == nil:
				won++
				winner = i
			case !store.IsDuplicateKey(err):
				t.Errorf("round %d: insert %d: got %v, want a duplicate-key error", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, won)
		}
		var got struct {
			By int `bson:"by"`
		}
		if err := s.Collection("things").FindOne(context.Background(), store.ByID(id)).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if got.By != winner {
			t.Errorf("round %d: the stored document was written by insert %d, the winner was %d", round, got.By, winner)
		}
	}
}

// One call's documents are unordered and decided each alone: a taken _id
// fails only its own document, and a repeated _id within the call loses
// to its first occurrence.
func TestBatchInsertPerDocumentOutcomes(t *testing.T) {
	s := storetest.New(t, things)
	b := s.Batch("things")
	ctx := context.Background()
	if err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: "taken"}}); err != nil {
		t.Fatal(err)
	}
	errs, err := b.Insert(ctx,
		bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "_id", Value: "taken"}},
		bson.D{{Key: "_id", Value: "b"}},
		bson.D{{Key: "_id", Value: "a"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, false, true} // duplicate?
	for i, e := range errs {
		if got := e != nil && store.IsDuplicateKey(e); got != want[i] || (e != nil && !want[i]) {
			t.Errorf("document %d: got %v, want duplicate=%v", i, e, want[i])
		}
	}
	if got := countDocs(t, s, "things"); got != 3 {
		t.Errorf("documents stored: got %d, want 3 (taken, a, b)", got)
	}
}

// A caller that has already given up sends nothing.
func TestBatchCanceledCallerSendsNothing(t *testing.T) {
	s := storetest.New(t, things)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Batch("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := countDocs(t, s, "things"); got != 0 {
		t.Errorf("documents stored: got %d, want 0", got)
	}
}

// A failed batch of several callers is uncertain for each of them: never
// the server's answer to one document, which a caller could read as
// "certainly not written"; timeouts stay timeouts.
func TestUncertainErrorHidesTheServersAnswer(t *testing.T) {
	server := mongo.CommandError{Code: 2, Message: "bad"}
	var se mongo.ServerError
	if errors.As(&store.UncertainError{Err: server}, &se) {
		t.Error("an uncertain batch error unwraps to a mongo.ServerError")
	}
	if !mongo.IsTimeout(&store.UncertainError{Err: fmt.Errorf("insert: %w", context.DeadlineExceeded)}) {
		t.Error("an uncertain batch error that timed out is not a timeout")
	}
}

// Concurrent inserts into several collections, some losing to a taken _id:
// each caller gets its own documents' outcomes, whichever collections the
// other documents of its command went to. On the embedded engine they
// travel together, one command for all the collections (batch.go,
// GroupWriteCommand), in fewer commands than the collections would take
// one by one.
func TestBatchAcrossCollections(t *testing.T) {
	colls := []store.Collection{{Name: "alpha"}, {Name: "beta"}, {Name: "gamma"}}
	s := storetest.New(t, colls...)
	ctx := context.Background()
	for _, c := range colls {
		if err := s.Batch(c.Name).InsertOne(ctx, bson.D{{Key: "_id", Value: "taken"}, {Key: "by", Value: "earlier"}}); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, perColl = 8, 6
	before := s.RoundTrips.ByName()["insert"]
	var widest atomic.Int64 // the most collections one insert command carried
	s.RoundTrips.Before(func(_ context.Context, e *event.CommandStartedEvent) {
		if n := int64(len(store.InsertCollections(e))); n > widest.Load() {
			widest.Store(n)
		}
	})
	t.Cleanup(func() { s.RoundTrips.Before(nil) })
	type call struct {
		coll string
		ids  []string
		errs []error
		err  error
	}
	var calls []*call
	for r := range rounds {
		for _, c := range colls {
			for i := range perColl {
				ids := []string{fmt.Sprintf("r%d-%d", r, i)}
				if i == 0 {
					ids = append(ids, "taken") // loses, beside a winner of the same call
				}
				calls = append(calls, &call{coll: c.Name, ids: ids})
			}
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range calls {
		wg.Go(func() {
			<-start
			docs := make([]any, len(c.ids))
			for j, id := range c.ids {
				docs[j] = bson.D{{Key: "_id", Value: id}, {Key: "by", Value: c.coll}}
			}
			c.errs, c.err = s.Batch(c.coll).Insert(ctx, docs...)
		})
	}
	close(start)
	wg.Wait()
	commands := s.RoundTrips.ByName()["insert"] - before
	for _, c := range calls {
		if c.err != nil {
			t.Fatalf("%s %v: %v", c.coll, c.ids, c.err)
		}
		for j, id := range c.ids {
			lost := c.errs[j] != nil
			if want := id == "taken"; lost != want || (lost && !store.IsDuplicateKey(c.errs[j])) {
				t.Errorf("%s %s: error %v, want a duplicate key error only for taken", c.coll, id, c.errs[j])
			}
		}
	}
	for _, c := range colls {
		if got, want := countDocs(t, s, c.Name), int64(1+rounds*perColl); got != want {
			t.Errorf("%s holds %d documents, want %d", c.Name, got, want)
		}
		var got struct{ By string }
		if err := s.Collection(c.Name).FindOne(ctx, store.ByID("r3-2")).Decode(&got); err != nil || got.By != c.Name {
			t.Errorf("%s r3-2 written by %q (%v), want %s", c.Name, got.By, err, c.Name)
		}
		if err := s.Collection(c.Name).FindOne(ctx, store.ByID("taken")).Decode(&got); err != nil || got.By != "earlier" {
			t.Errorf("%s taken written by %q (%v), want the earlier insert", c.Name, got.By, err)
		}
	}
	t.Logf("%d calls into %d collections in %d insert commands, up to %d collections in one", len(calls), len(colls), commands, widest.Load())
	if _, dir := storetest.URI(t); dir != "" && widest.Load() < 2 {
		t.Errorf("no insert command carried more than one collection: the embedded engine's group commit should")
	}
}

// Concurrent conditional replaces of one generation, released together
// with inserts: exactly one replace matches, the document holds the
// winner's write, and every insert lands. Each caller's answer is its own,
// whichever command carried it. On the embedded engine the replaces ride
// in the group commands with the inserts (batch.go), so the writes take
// fewer commands than callers.
func TestBatchReplaceOneDecidesOneGeneration(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	b := s.Batch("things")
	if err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: "rec"}, {Key: "token", Value: "g0"}}); err != nil {
		t.Fatal(err)
	}
	const n = 32
	before := s.RoundTrips.ByName()
	matched := make([]bool, n)
	errs := make([]error, n)
	together(2*n, func(k int) {
		i := k / 2
		if k%2 == 0 {
			matched[i], errs[i] = b.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "rec"}, {Key: "token", Value: "g0"}},
				bson.D{{Key: "_id", Value: "rec"}, {Key: "token", Value: fmt.Sprintf("g1-%d", i)}})
			return
		}
		if err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("ins%d", i)}}); err != nil {
			t.Errorf("insert %d: %v", i, err)
		}
	})
	after := s.RoundTrips.ByName()
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("replace %d: %v", i, errs[i])
		}
		if matched[i] {
			if winner >= 0 {
				t.Errorf("replaces %d and %d both matched generation g0", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no replace matched generation g0")
	}
	var doc struct{ Token string }
	if err := s.Collection("things").FindOne(ctx, store.ByID("rec")).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("g1-%d", winner); doc.Token != want {
		t.Errorf("rec holds token %s, want the winner's %s", doc.Token, want)
	}
	if got := countDocs(t, s, "things"); got != n+1 {
		t.Errorf("things holds %d documents, want %d", got, n+1)
	}
	commands := (after["insert"] - before["insert"]) + (after["update"] - before["update"])
	t.Logf("%d replaces and %d inserts in %d write commands", n, n, commands)
	if _, dir := storetest.URI(t); dir != "" && commands >= 2*n {
		t.Errorf("%d write commands for %d writes: the embedded engine's group commit should carry several", commands, 2*n)
	}

	// A replace that matches nothing reports so, and writes nothing.
	m, err := b.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "absent"}}, bson.D{{Key: "_id", Value: "absent"}, {Key: "token", Value: "x"}})
	if err != nil || m {
		t.Errorf("replace of an absent document: matched %v, %v; want false, nil", m, err)
	}
	if got := countDocs(t, s, "things"); got != n+1 {
		t.Errorf("things holds %d documents after a replace that matched nothing, want %d", got, n+1)
	}
}

// InsertTogether under concurrency: on the embedded engine each pair's two
// documents travel in one command, whatever else shares the queue, so they
// commit in one transaction; on MongoDB the second goes only after the
// first. Each document is still decided alone, and told its own outcome
// in a command that carries others' documents too.
func TestInsertTogether(t *testing.T) {
	s := storetest.New(t, store.Collection{Name: "first"}, store.Collection{Name: "second"}, store.Collection{Name: "other"})
	ctx := context.Background()
	first, second, other := s.Batch("first"), s.Batch("second"), s.Batch("other")

	// Which commands carried each document, read from the commands' bytes.
	var (
		mu      sync.Mutex
		sent    int
		carried = map[string][]int{} // "collection/_id" → command numbers
	)
	s.RoundTrips.Before(func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		sent++
		for _, c := range []string{"first", "second", "other"} {
			for _, d := range store.InsertDocuments(e, c) {
				k := c + "/" + d.Lookup("_id").StringValue()
				carried[k] = append(carried[k], sent)
			}
		}
	})
	t.Cleanup(func() { s.RoundTrips.Before(nil) })

	const pairs = 64
	doc := func(i int) bson.D { return bson.D{{Key: "_id", Value: fmt.Sprintf("d%d", i)}} }
	for i := 0; i < pairs; i += 3 { // every third pair's first document is taken already
		if err := first.InsertOne(ctx, doc(i)); err != nil {
			t.Fatal(err)
		}
	}
	sent = 0
	clear(carried)
	errs := make([][]error, pairs)
	fails := make([]error, pairs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range pairs {
		wg.Go(func() {
			<-start
			errs[i], fails[i] = s.InsertTogether(ctx, store.Together{Batch: first, Doc: doc(i)}, store.Together{Batch: second, Doc: doc(i)})
		})
		wg.Go(func() { // inserts of others, sharing the queue
			<-start
			if err := other.InsertOne(ctx, doc(i)); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	together := 0
	for i := range pairs {
		taken := i%3 == 0
		if fails[i] != nil || len(errs[i]) != 2 || (errs[i][0] != nil) != taken || (taken && !store.IsDuplicateKey(errs[i][0])) || errs[i][1] != nil {
			t.Fatalf("pair %d (first taken: %v): %v %v, want a duplicate key error for a taken first only", i, taken, errs[i], fails[i])
		}
		a, b := carried[fmt.Sprintf("first/d%d", i)], carried[fmt.Sprintf("second/d%d", i)]
		if len(a) != 1 || len(b) != 1 {
			t.Fatalf("pair %d sent in commands %v and %v, want one each", i, a, b)
		}
		switch {
		case s.OneWriter() && a[0] != b[0]:
			t.Errorf("pair %d: commands %d and %d, want one command", i, a[0], b[0])
		case !s.OneWriter() && a[0] >= b[0]:
			t.Errorf("pair %d: the second document in command %d, not after the first's (%d)", i, b[0], a[0])
		}
		if a[0] == b[0] {
			together++
		}
	}
	for _, c := range []string{"first", "second", "other"} {
		if n, err := s.Collection(c).CountDocuments(ctx, bson.D{}); err != nil || n != pairs {
			t.Errorf("%s holds %d documents (%v), want %d", c, n, err, pairs)
		}
	}
	t.Logf("%d of %d pairs in one command, %d commands in all", together, pairs, sent)

	// Each document decided alone: a taken first, a new second.
	got, err := s.InsertTogether(ctx, store.Together{Batch: first, Doc: doc(0)}, store.Together{Batch: second, Doc: doc(pairs)})
	if err != nil || !store.IsDuplicateKey(got[0]) || got[1] != nil {
		t.Errorf("taken first, new second: %v %v, want a duplicate key error, then nil", got, err)
	}
}
