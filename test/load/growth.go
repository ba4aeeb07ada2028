package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Latency as data grows (-grow): the same probe — -probe unique sends, the
// same texts again (duplicates), and a GET of each, one request at a time
// so that each figure is one request's own cost, not a queue's — on the
// nearly empty store right after the warm-up, and again once unique sends
// have grown the store to -grow messages.

// probe is one probe's three phases.
type probe struct {
	stored            int64 // messages stored when it ran
	unique, dup, read phase
}

// runProbe runs the probe named tag.
func (l *load) runProbe(ctx context.Context, st *rawStore, tag string) (probe, error) {
	var p probe
	var err error
	if p.stored, err = st.messages(ctx); err != nil {
		return p, err
	}
	reqs := make([]request, l.cfg.probe)
	for i := range reqs {
		reqs[i] = l.newRequest(fmt.Sprintf("probe-%s-%d", tag, i), i, "")
	}
	ans, took := l.pool(ctx, reqs, 1)
	l.expectSent("probe "+tag, reqs, ans)
	p.unique = phaseOf("unique send", 1, 0, ans, took, math.NaN())
	ans, took = l.pool(ctx, reqs, 1)
	l.expectDuplicate("probe "+tag, reqs, ans)
	p.dup = phaseOf("duplicate", 1, 0, ans, took, math.NaN())
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = l.answered[r.logical]
	}
	ans, took = l.gets(ctx, ids, 1)
	l.expectRead(ids, ans)
	p.read = phaseOf("GET /api/messages/{id}", 1, 0, ans, took, math.NaN())
	if ctx.Err() != nil {
		return p, fmt.Errorf("probe %s: the run did not finish within -timeout", tag)
	}
	return p, nil
}

// fill sends unique texts with -c clients until the store holds -grow
// messages; it returns the phase (nil when there was nothing to fill).
func (l *load) fill(ctx context.Context, st *rawStore) (*phase, error) {
	stored, err := st.messages(ctx)
	if err != nil {
		return nil, err
	}
	n := int64(l.cfg.grow) - stored
	if n <= 0 {
		return nil, nil
	}
	reqs := make([]request, n)
	for i := range reqs {
		reqs[i] = l.newRequest(fmt.Sprintf("fill-%d", i), i, "")
	}
	ans, took := l.pool(ctx, reqs, l.cfg.clients)
	l.expectSent("fill", reqs, ans)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("fill to %d messages: the run did not finish within -timeout", l.cfg.grow)
	}
	p := phaseOf(fmt.Sprintf("fill: unique sends from %d to %d stored messages", stored, l.cfg.grow), l.cfg.clients, 0, ans, took, math.NaN())
	return &p, nil
}

// messages counts the messages the server has stored (tombstones included:
// they are documents of the same collection).
func (s *rawStore) messages(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n, err := s.db.Collection("messages").CountDocuments(ctx, bson.D{}, options.Count())
	if err != nil {
		return 0, fmt.Errorf("count stored messages: %w", err)
	}
	return n, nil
}
