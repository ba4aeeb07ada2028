package messages

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkListPage is one page of GET /api/messages (its store part: the
// head probe, the entries, the messages) in a database holding 1,000
// messages and in one holding 100,000, seeded through the index writer's
// own functions. The claim is that both cost the same: every read is by
// _id. The machine is shared, so the two sizes are measured in alternating
// rounds, and storeRT/op (exact) is reported next to the time.
//
//	go test -run '^$' -bench ListPage -benchtime 100x ./messages/
func BenchmarkListPage(b *testing.B) {
	sizes := []int{1_000, 100_000}
	envs := make([]*feedEnv, len(sizes))
	for i, n := range sizes {
		envs[i] = newFeedEnv(b)
		envs[i].seed(n, nil)
	}
	for round := 1; round <= 3; round++ {
		for i, n := range sizes {
			e := envs[i]
			for _, bc := range []struct {
				name, params string
				middle       bool // start from a cursor half-way down the feed
			}{
				{"first-page-limit20", "limit=20", false},
				{"mid-cursor-limit20", "limit=20", true},
				{"lead-first-page-limit100", "limit=100&leadId=" + LeadID(e.ws, "+15550100001", ""), false},
			} {
				b.Run(fmt.Sprintf("round%d/%s/messages=%d", round, bc.name, n), func(b *testing.B) {
					q := e.query(bc.params)
					if bc.middle {
						q.cursor = int64(n / 2)
					}
					ctx := context.Background()
					before := e.st.RoundTrips.Total()
					for b.Loop() {
						p, err := e.s.List(ctx, e.ws, q)
						if err != nil || len(p.Data) != q.Limit {
							b.Fatalf("%v, %d messages", err, len(p.Data))
						}
					}
					b.ReportMetric(float64(e.st.RoundTrips.Total()-before)/float64(b.N), "storeRT/op")
				})
			}
			// A process that has never seen the feed (no remembered head).
			b.Run(fmt.Sprintf("round%d/first-page-cold-process/messages=%d", round, n), func(b *testing.B) {
				q := e.query("limit=20")
				ctx := context.Background()
				before := e.st.RoundTrips.Total()
				for b.Loop() {
					b.StopTimer()
					s := NewStore(e.st)
					b.StartTimer()
					if _, err := s.List(ctx, e.ws, q); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(e.st.RoundTrips.Total()-before)/float64(b.N), "storeRT/op")
			})
		}
	}
}
