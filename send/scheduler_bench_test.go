package send_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/schedule"
)

// BenchmarkScheduleAsFutureGrows: what scheduled sends cost on an empty
// store and on one holding 100,000 future scheduled messages (spread over
// the next 35 days, as messages and slots), on the embedded engine, one
// request at a time, in-process over loopback HTTP. Per size and round:
//
//   - accept: POST /api/messages with a sendAt 3 s ahead (ns and store
//     round trips per request);
//   - due: the scheduler's work once those messages are due — one Pass
//     and the sends it starts, to the recorded outcome — per message
//     (ns and round trips per due message);
//   - idle: one Pass with nothing due (round trips).
//
// The claim is that the three are flat in the number of future messages:
// the scheduler reads only the buckets of the last minutes and the next,
// and every read is by _id. Sizes alternate by round, so a change in the
// machine's load hits both.
//
//	go test -run '^$' -bench ScheduleAsFutureGrows -benchtime 1x -timeout 30m ./send/
func BenchmarkScheduleAsFutureGrows(b *testing.B) {
	const perRound = 100
	sizes := []int{0, 100_000}
	envs := make([]*apitest.Env, len(sizes))
	for i, n := range sizes {
		e := apitest.New(b, apitest.Options{Events: true})
		seedFuture(b, e, n)
		if _, err := e.Scheduler.Pass(context.Background()); err != nil { // the first pass reads the low water
			b.Fatal(err)
		}
		envs[i] = e
	}
	ctx := context.Background()
	sent := 0
	for round := 1; round <= 3; round++ {
		for i, n := range sizes {
			e := envs[i]
			b.Run(fmt.Sprintf("round%d/future=%d", round, n), func(b *testing.B) {
				for b.Loop() {
					due := time.Now().Add(3 * time.Second)
					rt0, t0 := e.Store.RoundTrips.Total(), time.Now()
					for range perRound {
						sent++
						body := fmt.Sprintf(`{"channel":"sms","recipientPhone":"+1555080%04d","body":"Reminder %d","sendAt":%q}`, sent%10000, sent, due.Format(time.RFC3339Nano))
						if r := e.Send(body); r.Status/100 != 2 || r.JSON()["status"] != "scheduled" {
							b.Fatalf("schedule: %d %s", r.Status, r.Body)
						}
					}
					acceptNs := float64(time.Since(t0).Nanoseconds()) / perRound
					acceptRT := float64(e.Store.RoundTrips.Total()-rt0) / perRound

					if time.Now().After(due) {
						b.Fatalf("accepting %d messages took past their time", perRound)
					}
					time.Sleep(time.Until(due))
					before := e.Sender.Count()
					rt0, t0 = e.Store.RoundTrips.Total(), time.Now()
					started, err := e.Scheduler.Pass(ctx)
					if err != nil {
						b.Fatal(err)
					}
					e.Scheduler.Wait()
					dueNs := float64(time.Since(t0).Nanoseconds()) / perRound
					dueRT := float64(e.Store.RoundTrips.Total()-rt0) / perRound
					if started != perRound || e.Sender.Count()-before != perRound {
						b.Fatalf("the pass started %d and sent %d, want %d", started, e.Sender.Count()-before, perRound)
					}

					rt0 = e.Store.RoundTrips.Total()
					if _, err := e.Scheduler.Pass(ctx); err != nil {
						b.Fatal(err)
					}
					idleRT := float64(e.Store.RoundTrips.Total() - rt0)

					b.ReportMetric(acceptNs, "accept-ns/msg")
					b.ReportMetric(acceptRT, "accept-storeRT/msg")
					b.ReportMetric(dueNs, "due-ns/msg")
					b.ReportMetric(dueRT, "due-storeRT/msg")
					b.ReportMetric(idleRT, "idle-storeRT/pass")
				}
			})
		}
	}
}

// seedFuture stores n scheduled messages of e's workspace due over the
// next 35 days (from an hour ahead), with their slots, in batches.
func seedFuture(b *testing.B, e *apitest.Env, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	span := schedule.MaxAhead - 2*time.Hour
	slots := make([]schedule.Slot, 0, n)
	var msgs []any
	for i := range n {
		at := now.Add(time.Hour + time.Duration(float64(span)*float64(i)/float64(n)))
		phone := fmt.Sprintf("+1555090%04d", i%10000)
		m := messages.Message{ID: msgapi.NewID("msg"), WorkspaceID: e.WSID, LeadID: messages.LeadID(e.WSID, phone, ""),
			ConversationID: messages.ConversationID(e.WSID, phone, ""), Channel: messages.ChannelSMS, Direction: "outbound",
			RecipientPhone: phone, Body: fmt.Sprintf("seeded %d", i), Status: messages.StatusScheduled, SendAt: &at,
			CreatedAt: now, UpdatedAt: now}
		msgs = append(msgs, m)
		slots = append(slots, schedule.Slot{MessageID: m.ID, WorkspaceID: e.WSID, SendAt: at})
		if len(msgs) == 1000 || i == n-1 {
			if _, err := e.Store.Collection("messages").InsertMany(ctx, msgs, options.InsertMany().SetOrdered(false)); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	if err := schedule.New(e.Store).Seed(ctx, slots); err != nil {
		b.Fatal(err)
	}
}
