package workspace

import "context"

// SetBeforeLookup makes every store lookup of a key call f first, with the
// lookup's context.
func (s *Store) SetBeforeLookup(f func(ctx context.Context)) { s.beforeLookup = f }

// UnknownKeys is the size of the negative cache of keys.
func (s *Store) UnknownKeys() int {
	s.unknownKeys.mu.Lock()
	defer s.unknownKeys.mu.Unlock()
	return len(s.unknownKeys.m)
}

// SetNegativeSize rebuilds the negative caches with room for n values.
func (s *Store) SetNegativeSize(n int) {
	s.unknownKeys = newNegative(NegativeTTL, n)
	s.unknownSpace = newNegative(NegativeTTL, n)
}
