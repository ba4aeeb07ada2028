package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// load runs the scenarios against one target and checks every answer.
type load struct {
	cfg    config
	t      target
	runID  string
	rcv    *receiver
	client *http.Client

	expected []string          // every logical message of the run
	answered map[string]string // logical message → the message id the answers named
	failures []string
}

func newLoad(cfg config, t target, runID string, rcv *receiver) *load {
	return &load{
		cfg: cfg, t: t, runID: runID, rcv: rcv,
		client:   newHTTPClient(max(cfg.clients, cfg.stormSize*stormRunners(cfg)) + 4),
		answered: map[string]string{},
	}
}

// stormRunners is how many storms run at once: as many whole storms as fit
// in -c clients, at least one.
func stormRunners(cfg config) int { return max(1, cfg.clients/cfg.stormSize) }

func (l *load) fail(format string, args ...any) {
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

// request is one POST /api/messages.
type request struct {
	logical string // the logical message it carries
	body    []byte
	key     string // Idempotency-Key, or ""
}

// answer is what came back for one request.
type answer struct {
	took       time.Duration
	status     int
	body       []byte
	replayed   bool   // Idempotent-Replayed: true
	kind       string // sent, duplicate, pending, or error
	sendStatus string // the message's status, for kind sent
	messageID  string // the message the answer names, if any
	err        error
}

// phone is the recipient of lead i: +1 555 010 xxxx.
func phone(lead int) string { return fmt.Sprintf("+1555010%04d", lead) }

// newRequest is a new logical message: a text nobody has been sent yet, to
// lead n modulo -leads.
func (l *load) newRequest(logical string, n int, key string) request {
	l.expected = append(l.expected, logical)
	body, _ := json.Marshal(map[string]string{
		"channel":        "sms",
		"recipientPhone": phone(n % l.cfg.leads),
		"body":           bodyPrefix(l.runID) + logical + ": Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out.",
	})
	return request{logical: logical, body: body, key: key}
}

func (l *load) do(ctx context.Context, r request) answer {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.t.url+"/api/messages", bytes.NewReader(r.body))
	req.Header.Set("Authorization", "Bearer "+l.t.key)
	req.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	start := time.Now()
	res, err := l.client.Do(req)
	if err != nil {
		return answer{took: time.Since(start), kind: "error", err: err}
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	a := answer{took: time.Since(start), status: res.StatusCode, body: body, kind: "error", err: err,
		replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	if err != nil || (res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated) {
		return a
	}
	var v struct {
		Status        string `json:"status"`
		DuplicateOnly bool   `json:"duplicateOnly"`
		Message       *struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if a.err = json.Unmarshal(body, &v); a.err != nil {
		return a
	}
	switch {
	case v.DuplicateOnly && v.Message == nil:
		a.kind = "pending"
	case v.DuplicateOnly:
		a.kind, a.messageID = "duplicate", v.Message.ID
	case v.Message != nil:
		a.kind, a.messageID, a.sendStatus = "sent", v.Message.ID, v.Status
	}
	return a
}

// pool sends reqs with n clients, each taking the next request when its
// last one is answered.
func (l *load) pool(ctx context.Context, reqs []request, n int) ([]answer, time.Duration) {
	return inParallel(ctx, reqs, n, l.do)
}

// inParallel runs do on each item with n clients, each taking the next
// item when its last one is answered, and returns the answers in order.
func inParallel[T any](ctx context.Context, items []T, n int, do func(context.Context, T) answer) ([]answer, time.Duration) {
	answers := make([]answer, len(items))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(n, len(items)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(items) {
					return
				}
				answers[i] = do(ctx, items[i])
			}
		})
	}
	wg.Wait()
	return answers, time.Since(start)
}

// stormsOf sends each storm's requests all at once (goroutines released
// together by a barrier), runners storms at a time.
func (l *load) stormsOf(ctx context.Context, storms [][]request, runners int) ([][]answer, time.Duration) {
	answers := make([][]answer, len(storms))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(runners, len(storms)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				s := int(next.Add(1)) - 1
				if s >= len(storms) {
					return
				}
				answers[s] = make([]answer, len(storms[s]))
				var ready, done sync.WaitGroup
				gate := make(chan struct{})
				for i, r := range storms[s] {
					ready.Add(1)
					done.Go(func() {
						ready.Done()
						<-gate
						answers[s][i] = l.do(ctx, r)
					})
				}
				ready.Wait()
				close(gate)
				done.Wait()
			}
		})
	}
	wg.Wait()
	return answers, time.Since(start)
}

// note records the message id an answer named for a logical message; every
// answer for one logical message must name the same one.
func (l *load) note(scenario, logical, id string) {
	if id == "" {
		return
	}
	if prev, ok := l.answered[logical]; ok && prev != id {
		l.fail("%s: %s: answered with message %s, earlier with %s", scenario, logical, id, prev)
		return
	}
	l.answered[logical] = id
}

func (l *load) expectSent(scenario string, reqs []request, answers []answer) {
	for i, a := range answers {
		if a.kind != "sent" || a.sendStatus != "sent" {
			l.fail("%s: %s: want a send with status sent, got %s", scenario, reqs[i].logical, describe(a))
			continue
		}
		l.note(scenario, reqs[i].logical, a.messageID)
	}
}

func (l *load) expectDuplicate(scenario string, reqs []request, answers []answer) {
	for i, a := range answers {
		if a.kind != "duplicate" {
			l.fail("%s: %s: want a duplicate naming the original, got %s", scenario, reqs[i].logical, describe(a))
			continue
		}
		l.note(scenario, reqs[i].logical, a.messageID)
	}
}

// expectStorm wants exactly one send per storm; every other answer is a
// duplicate naming it, or "still in flight" when the original took longer
// than the server's wait.
func (l *load) expectStorm(storm []request, answers []answer) {
	kinds := map[string]int{}
	for i, a := range answers {
		kinds[a.kind]++
		switch a.kind {
		case "sent", "duplicate":
			l.note("storm", storm[i].logical, a.messageID)
		case "pending":
		default:
			l.fail("storm: %s: %s", storm[i].logical, describe(a))
		}
	}
	if kinds["sent"] != 1 {
		l.fail("storm: %s: %d of %d requests sent, want exactly 1", storm[0].logical, kinds["sent"], len(storm))
	}
}

// expectReplay wants the first answer to the key, byte for byte, marked as
// a replay.
func (l *load) expectReplay(r request, first, a answer) {
	if !a.replayed || a.status != first.status || !bytes.Equal(a.body, first.body) {
		l.fail("replay: %s: want the first answer (%d, %d bytes) replayed, got %s replayed=%t", r.logical, first.status, len(first.body), describe(a), a.replayed)
	}
}

func describe(a answer) string {
	if a.err != nil {
		return fmt.Sprintf("%s (%d): %v", a.kind, a.status, a.err)
	}
	b := a.body
	if len(b) > 160 {
		b = b[:160]
	}
	return fmt.Sprintf("%s (%d) %s", a.kind, a.status, b)
}

// all runs the whole benchmark and returns its report.
func (l *load) all(ctx context.Context) (*report, error) {
	c := l.cfg
	rep := newReport(c, l.t)
	st, err := openRawStore(ctx, l.t.storeURI, l.t.storeDB, c.clients)
	if err != nil {
		return nil, err
	}
	defer st.close()

	// scenario runs one scenario and adds it to the report, with the store
	// commands it cost per request as the store itself counted them.
	var scenario scenarioFunc = func(name string, clients, roundTrips int, send func() ([]answer, time.Duration)) ([]answer, error) {
		before, counted := st.commands(ctx)
		w0 := l.writer(ctx)
		answers, took := send()
		w1 := l.writer(ctx)
		after, _ := st.commands(ctx)
		cmds := math.NaN()
		if counted && len(answers) > 0 {
			cmds = float64(after-before) / float64(len(answers))
		}
		p := phaseOf(name, clients, roundTrips, answers, took, cmds)
		p.writerUse, p.hasWriter = w0.to(w1, took)
		p.cpuUse, p.hasCPU = w0.cpuTo(w1, took)
		// The events the phase left behind, and how long the dispatcher
		// took to catch up after the phase's last answer. Every phase
		// then starts with an empty backlog.
		if n, d, err := st.quiesce(ctx); err != nil {
			l.fail("%s: events: %v", name, err)
		} else {
			p.eventsLeft, p.drained = n, d
		}
		rep.add(p)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: the run did not finish within -timeout %s", name, c.timeout)
		}
		return answers, nil
	}
	pooled := func(reqs []request) func() ([]answer, time.Duration) {
		return func() ([]answer, time.Duration) { return l.pool(ctx, reqs, c.clients) }
	}

	// Warm-up: creates the leads, opens the connections, fills the key cache.
	warm := make([]request, c.leads)
	for i := range warm {
		warm[i] = l.newRequest(fmt.Sprintf("lead-%d", i), i, "")
	}
	ans, err := scenario("warm-up: first send to a new lead", c.clients, 0, pooled(warm))
	if err != nil {
		return nil, err
	}
	l.expectSent("warm-up", warm, ans)

	if c.grow > 0 {
		l.quiesce(ctx, st, rep, "before the first probe")
		if rep.probes[0], err = l.runProbe(ctx, st, "start"); err != nil {
			return nil, err
		}
	}

	l.quiesce(ctx, st, rep, "before the first raw phase")
	raw, err := st.run(ctx, l.runID+"_1", c.clients, c.raw)
	if err != nil {
		return nil, err
	}
	rep.raw = append(rep.raw, raw)

	unique := make([]request, c.unique)
	for i := range unique {
		unique[i] = l.newRequest(fmt.Sprintf("unique-%d", i), i, "")
	}
	if ans, err = scenario("unique send, known lead", c.clients, 8, pooled(unique)); err != nil {
		return nil, err
	}
	l.expectSent("unique", unique, ans)

	resend := make([]request, c.resends)
	for i := range resend {
		resend[i] = unique[i%len(unique)]
	}
	if ans, err = scenario("resend: duplicate, original written", c.clients, 4, pooled(resend)); err != nil {
		return nil, err
	}
	l.expectDuplicate("resend", resend, ans)

	reads := make([]string, c.gets)
	for i := range reads {
		reads[i] = l.answered[unique[i%len(unique)].logical]
	}
	if ans, err = scenario("read: GET /api/messages/{id}", c.clients, 1, func() ([]answer, time.Duration) { return l.gets(ctx, reads, c.clients) }); err != nil {
		return nil, err
	}
	l.expectRead(reads, ans)

	storms := make([][]request, c.storms)
	for s := range storms {
		r := l.newRequest(fmt.Sprintf("storm-%d", s), s, "")
		storms[s] = make([]request, c.stormSize)
		for i := range storms[s] {
			storms[s][i] = r
		}
	}
	var stormAnswers [][]answer
	_, err = scenario(fmt.Sprintf("storm: %d identical at once", c.stormSize), stormRunners(c)*c.stormSize, 0, func() ([]answer, time.Duration) {
		var took time.Duration
		stormAnswers, took = l.stormsOf(ctx, storms, stormRunners(c))
		return slices.Concat(stormAnswers...), took
	})
	if err != nil {
		return nil, err
	}
	for s, as := range stormAnswers {
		l.expectStorm(storms[s], as)
	}

	keyed := make([]request, c.keys)
	for i := range keyed {
		keyed[i] = l.newRequest(fmt.Sprintf("keyed-%d", i), i, fmt.Sprintf("load-%s-%d", l.runID, i))
	}
	first, err := scenario(keyedScenario, c.clients, 11, pooled(keyed))
	if err != nil {
		return nil, err
	}
	l.expectSent("keyed", keyed, first)

	replays := make([]request, c.replays)
	for i := range replays {
		replays[i] = keyed[i%len(keyed)]
	}
	if ans, err = scenario("Idempotency-Key replay", c.clients, 1, pooled(replays)); err != nil {
		return nil, err
	}
	for i, a := range ans {
		l.expectReplay(replays[i], first[i%len(keyed)], a)
	}

	if c.expired > 0 {
		if err := l.duringReap(ctx, st, rep, scenario, unique); err != nil {
			return nil, err
		}
	}

	l.quiesce(ctx, st, rep, "before the second raw phase")
	if raw, err = st.run(ctx, l.runID+"_2", c.clients, c.raw); err != nil {
		return nil, err
	}
	rep.raw = append(rep.raw, raw)

	if c.grow > 0 {
		if rep.fill, err = l.fill(ctx, st); err != nil {
			return nil, err
		}
		l.quiesce(ctx, st, rep, "after the fill, before the second probe")
		if rep.probes[1], err = l.runProbe(ctx, st, "grown"); err != nil {
			return nil, err
		}
	}

	l.checkDeliveries(rep, l.rcv.settle())
	rep.failures = l.failures
	rep.checkTail()
	return rep, nil
}

// quiesce waits for the event backlog to drain and notes what it waited for.
func (l *load) quiesce(ctx context.Context, st *rawStore, rep *report, when string) {
	n, took, err := st.quiesce(ctx)
	switch {
	case err != nil:
		l.fail("quiesce %s: %v", when, err)
	case n > 0:
		rep.notes = append(rep.notes, fmt.Sprintf("events: %d were pending %s; the dispatcher drained them in %.1f s", n, when, took.Seconds()))
	}
}

// scenarioFunc runs one measured scenario (see all).
type scenarioFunc func(name string, clients, roundTrips int, send func() ([]answer, time.Duration)) ([]answer, error)

// duringReap seeds -expired expired locks naming the unique sends'
// messages, waits for the server's reaper to start on them, and measures
// -unique/2 new unique sends while it works.
func (l *load) duringReap(ctx context.Context, st *rawStore, rep *report, scenario scenarioFunc, unique []request) error {
	c := l.cfg
	ids := make([]string, 0, len(unique))
	for _, r := range unique {
		ids = append(ids, l.answered[r.logical])
	}
	if err := st.seedExpired(ctx, l.runID, c.expired, ids); err != nil {
		return err
	}
	before, err := st.expiredLocks(ctx)
	if err != nil {
		return err
	}
	if err := st.waitReaperStarted(ctx, before); err != nil {
		return err
	}
	atStart, err := st.expiredLocks(ctx)
	if err != nil {
		return err
	}
	reqs := make([]request, c.unique/2)
	for i := range reqs {
		reqs[i] = l.newRequest(fmt.Sprintf("during-reap-%d", i), i, "")
	}
	name := fmt.Sprintf("unique send during a reaper pass over %d expired locks", c.expired)
	ans, err := scenario(name, c.clients, 8, func() ([]answer, time.Duration) { return l.pool(ctx, reqs, c.clients) })
	if err != nil {
		return err
	}
	l.expectSent("during reap", reqs, ans)
	atEnd, err := st.expiredLocks(ctx)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("reaper: %d of the %d expired locks were left when the sends began, %d when they ended", atStart, c.expired, atEnd)
	if atEnd == 0 {
		note += " (the pass ended before the sends did: the row is partly sends without it)"
	}
	// The raw phase after this one measures the store alone: let the pass finish first.
	left, waited, err := st.waitReaped(ctx, 5*time.Minute)
	if err != nil {
		return err
	}
	if left == 0 {
		note += fmt.Sprintf("; the pass finished %.0f s after the sends", waited.Seconds())
	} else {
		note += fmt.Sprintf("; %d were still left %.0f s after the sends", left, waited.Seconds())
	}
	rep.notes = append(rep.notes, note)
	return nil
}

// checkDeliveries is the point of the exercise: each logical message of
// the run reached the receiver exactly once, as the message its answers
// named.
func (l *load) checkDeliveries(rep *report, d deliveries) {
	if d.badSig > 0 || d.badPayload > 0 {
		l.fail("deliveries: %d with a bad signature, %d not in the relay contract", d.badSig, d.badPayload)
	}
	want := map[string]bool{}
	exact := 0
	for _, logical := range l.expected {
		want[logical] = true
		ids := d.byLogical[logical]
		switch {
		case len(ids) != 1:
			l.fail("deliveries: %s delivered %d times, want exactly 1", logical, len(ids))
		case ids[0] != l.answered[logical]:
			l.fail("deliveries: %s delivered as message %s, but the answers named %q", logical, ids[0], l.answered[logical])
		default:
			exact++
		}
	}
	for logical, ids := range d.byLogical {
		if !want[logical] {
			l.fail("deliveries: %s (%d deliveries) was never sent by this run", logical, len(ids))
		}
	}
	for id, n := range d.byMessage {
		if n != 1 {
			l.fail("deliveries: message %s delivered %d times", id, n)
		}
	}
	rep.delivery = fmt.Sprintf("%d logical messages, %d delivered exactly once; %d deliveries in all, %d badly signed, %d foreign",
		len(l.expected), exact, d.total, d.badSig, d.foreign)
}

// rawStore measures the store's own insert rate, the unit the scenarios
// are compared in, and counts the commands the store serves.
type rawStore struct {
	client *mongo.Client
	db     *mongo.Database
	colls  []string
}

func openRawStore(ctx context.Context, uri, db string, clients int) (*rawStore, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetMaxPoolSize(uint64(clients)).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to the store: %w", err)
	}
	if err := c.Ping(ctx, nil); err != nil {
		_ = c.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("connect to the store %s: %w", uri, err)
	}
	return &rawStore{client: c, db: c.Database(db)}, nil
}

// run inserts n small documents with string _ids, shaped like a duplicate
// guard lock, into a new scratch collection with the given number of
// clients, after clients×2 untimed inserts that open the connections.
func (s *rawStore) run(ctx context.Context, suffix string, clients, n int) (phase, error) {
	name := "load_raw_" + suffix
	if err := s.db.CreateCollection(ctx, name); err != nil {
		return phase{}, fmt.Errorf("create scratch collection %s: %w", name, err)
	}
	s.colls = append(s.colls, name)
	coll := s.db.Collection(name)
	if _, _, err := s.insert(ctx, coll, "warm", clients, clients*2); err != nil {
		return phase{}, err
	}
	before, counted := s.commands(ctx)
	took, elapsed, err := s.insert(ctx, coll, "", clients, n)
	if err != nil {
		return phase{}, err
	}
	after, _ := s.commands(ctx)
	cmds := math.NaN()
	if counted {
		cmds = float64(after-before) / float64(n)
	}
	ans := make([]answer, len(took))
	for i, d := range took {
		ans[i] = answer{took: d}
	}
	return phaseOf("raw InsertOne", clients, 1, ans, elapsed, cmds), nil
}

func (s *rawStore) insert(ctx context.Context, coll *mongo.Collection, prefix string, clients, n int) ([]time.Duration, time.Duration, error) {
	took := make([]time.Duration, n)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for range min(clients, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", coll.Name(), prefix, i))
				now := time.Now()
				doc := bson.D{
					{Key: "_id", Value: hex.EncodeToString(id[:])},
					{Key: "workspaceId", Value: "ws_load"},
					{Key: "messageId", Value: fmt.Sprintf("msg_load_%s%d", prefix, i)},
					{Key: "createdAt", Value: now},
					{Key: "expiresAt", Value: now.Add(15 * time.Minute)},
				}
				_, err := coll.InsertOne(ctx, doc)
				took[i] = time.Since(now)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("raw insert into %s: %w", coll.Name(), err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first == nil && ctx.Err() != nil {
		first = errors.New("raw inserts: the run did not finish within -timeout")
	}
	return took, elapsed, first
}

// dataCommands are the commands that read or write documents: the store
// round trips of a request. Handshakes, heartbeats and serverStatus are not.
var dataCommands = []string{"insert", "msgapiWrite", "find", "msgapiGet", "update", "delete", "findAndModify", "getMore", "aggregate", "count", "distinct"}

// commands is the number of data commands the store has served, from all
// its clients, by its own count (serverStatus metrics.commands, which both
// MongoDB and the embedded engine keep). ok is false where the store does
// not tell (e.g. no clusterMonitor role).
func (s *rawStore) commands(ctx context.Context) (n int64, ok bool) {
	raw, err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		return 0, false
	}
	cmds, ok := raw.Lookup("metrics", "commands").DocumentOK()
	if !ok {
		return 0, false
	}
	for _, name := range dataCommands {
		if v, ok := cmds.Lookup(name, "total").AsInt64OK(); ok {
			n += v
		}
	}
	return n, true
}

// close drops the scratch collections and disconnects.
func (s *rawStore) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range s.colls {
		_ = s.db.Collection(name).Drop(ctx)
	}
	_ = s.client.Disconnect(ctx)
}
