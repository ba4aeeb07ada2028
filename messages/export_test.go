package messages

import (
	"testing"

	"github.com/msgapi/msgapi/store"
)

// Seed writes n sent messages to one lead of workspace ws the fast way
// (feedEnv.seed: the index writer's own functions, many documents per
// insert), for the benchmarks of package messages_test.
func Seed(t testing.TB, st *store.Store, ws string, n int) {
	t.Helper()
	e := &feedEnv{t: t, st: st, s: NewStore(st), ws: ws}
	e.seed(n, nil)
}

// SeedPhone is the recipient of the messages Seed writes.
const SeedPhone = "+15550100001"
