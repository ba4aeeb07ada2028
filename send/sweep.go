package send

// The outcome sweeper turns lost provider outcomes into "unknown".
//
// A message is written (status sending) before its provider is called and
// its outcome is recorded after. A process that dies in between — kill -9,
// a crash, a shutdown that ran out of time — leaves it "sending" forever:
// GET says sending hours later, and the duplicate guard answers every retry
// with it. The sweeper decides such a message: once it is older than the
// send timeout plus a margin, no live process can still be in its provider
// call (every call has that timeout, and outcome writes retry within the
// margin), so it becomes "unknown" — it may have been delivered — with an
// event and a counter. It runs at start-up and periodically, in every
// process; two sweepers deciding one message write the same thing.
//
// "Older than" is judged on the sweeper's own clock: a message is decided
// only after this process has seen it sending for After, not from its
// createdAt, which another process's clock wrote: a sweeper whose clock
// ran seconds ahead marked messages unknown while their provider call was
// still running. The price: after a restart a lost outcome is decided
// After after the first pass that sees it.
//
// A pass must not cost more as messages accumulate: on the embedded engine
// any filter but {_id} scans the whole collection. So it never searches the
// messages: it takes the candidates from the duplicate guard's live locks
// (every guarded send of the last window names its message there) and
// reads each by _id, once per process; a message it has seen final is not
// read again.

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/messages"
)

// LostError is the error recorded on a message whose outcome was lost.
const LostError = "outcome lost: the process ended during the provider call"

// SweeperOptions configure NewSweeper.
type SweeperOptions struct {
	Messages *messages.Store
	// Holders lists the messages that may still be sending (guard.Holders).
	Holders func(ctx context.Context) ([]guard.Holder, error)
	// After is how old a message still "sending" must be to be decided:
	// the send timeout plus a margin.
	After time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log zerolog.Logger
	// Lost, optional, counts each decided message (metrics).
	Lost func()
}

// Sweeper decides lost outcomes. Safe for concurrent use.
type Sweeper struct {
	o SweeperOptions

	mu      sync.Mutex
	settled map[string]time.Time // message id → when it stops being a candidate
	seen    map[string]time.Time // message id → when this process first saw it sending
}

// NewSweeper returns a Sweeper. Messages, Holders and After are required.
func NewSweeper(o SweeperOptions) *Sweeper {
	if o.Messages == nil || o.Holders == nil || o.After <= 0 {
		panic("send.NewSweeper: Messages, Holders and After are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lost == nil {
		o.Lost = func() {}
	}
	return &Sweeper{o: o, settled: map[string]time.Time{}, seen: map[string]time.Time{}}
}

// Sweep runs one pass and returns how many messages it marked unknown.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.o.Now()
	hs, err := s.o.Holders(ctx)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	for id, until := range s.settled {
		if now.After(until) {
			delete(s.settled, id)
		}
	}
	live := make(map[string]bool, len(hs))
	for _, h := range hs {
		live[h.MessageID] = true
	}
	for id := range s.seen {
		if !live[id] {
			delete(s.seen, id)
		}
	}
	s.mu.Unlock()

	lost := 0
	for _, h := range hs {
		if now.Sub(h.CreatedAt) < s.o.After || s.isSettled(h.MessageID) {
			continue
		}
		m, found, err := s.o.Messages.Get(ctx, h.MessageID)
		if err != nil {
			return lost, err
		}
		switch {
		case !found:
			// Its winner died before writing it: the guard fences and
			// takes the lock over on the next identical request. Look
			// again next pass.
			continue
		case m.Status != messages.StatusSending:
			s.settle(h)
			continue
		case now.Sub(m.CreatedAt) < s.o.After:
			continue // written late in its lock's life: not yet
		case s.sendingFor(m.ID, now) < s.o.After:
			continue // not seen sending for After on this clock yet
		}
		// On the embedded engine the write is by _id: a late outcome that
		// lands between the read above and this write is overwritten
		// (RELIABILITY.md, finding 1). One that lands after it moves the
		// message on from unknown, as a late answer may.
		m.Status, m.Error = messages.StatusUnknown, LostError
		if err := s.o.Messages.RecordOutcome(ctx, &m); err != nil {
			return lost, err
		}
		s.settle(h)
		lost++
		s.o.Lost()
		s.o.Log.Warn().Str("event", events.OutcomeLost).Str("workspaceId", m.WorkspaceID).
			Str("messageId", m.ID).Str("channel", m.Channel).Str("provider", m.Provider).
			Int64("ageMs", now.Sub(m.CreatedAt).Milliseconds()).
			Msg("send outcome lost: the message was still sending long after the send timeout; now unknown")
	}
	return lost, nil
}

// sendingFor is how long this process has seen message id sending.
func (s *Sweeper) sendingFor(id string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.seen[id]
	if !ok {
		s.seen[id] = now
		return 0
	}
	return max(now.Sub(t), 0)
}

func (s *Sweeper) isSettled(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.settled[id]
	return ok
}

// settle remembers a final message while its lock is live: after that it
// is no candidate anyway.
func (s *Sweeper) settle(h guard.Holder) {
	s.mu.Lock()
	s.settled[h.MessageID] = h.ExpiresAt
	s.mu.Unlock()
}

// Run sweeps now and then every interval until ctx ends. A failed pass is
// logged and retried at the next tick.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.o.Log.Warn().Err(err).Str("event", "outcome.sweep_failed").Msg("outcome sweeper pass failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
