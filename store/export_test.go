package store

import (
	"context"
	"time"
)

// IDLookupPlan exposes the query plan check to the external test package.
func IDLookupPlan(ctx context.Context, s *Store, coll string) (string, error) {
	return idLookupPlan(ctx, s.sqlite, coll)
}

// DBOptions exposes dbOptions to the tests.
var DBOptions = dbOptions

// HoldWriteGate takes s's write slot as a write command would, and returns
// its release: until then every write of s queues.
func HoldWriteGate(s *Store) (release func()) {
	if err := s.gate.acquire(time.Time{}, nil); err != nil {
		panic(err)
	}
	return s.gate.release
}

// Gate exposes the write gate's queue to the tests.
type Gate = writeGate

// NewGate returns a write gate of its own.
var NewGate = newWriteGate

// Acquire waits for g's slot until deadline (none when zero).
func (g *Gate) Acquire(deadline time.Time) error { return g.acquire(deadline, nil) }

// Release gives g's slot back.
func (g *Gate) Release() { g.release() }

// ExpiredPlan exposes the reaper's expiry scan plan to the tests.
func ExpiredPlan(ctx context.Context, s *Store, c Collection) (string, error) {
	return expiredPlan(ctx, s.sqlite, c)
}

// EngineCheck exposes engineCheck to the tests.
var EngineCheck = engineCheck
