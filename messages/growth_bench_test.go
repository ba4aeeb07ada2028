package messages_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/messages"
)

// BenchmarkSendAsDataGrows: a unique send, a duplicate and a
// GET /api/messages/{id}, end to end over loopback HTTP, one request at a
// time, on a workspace whose store holds 1,000 messages and on one holding
// 100,000 (plus their 400,000 index documents), seeded through the index
// writer's own functions and all to the lead the requests go to (its feeds
// are the deepest). The claim is that each costs the same at both sizes:
// every read and write is by _id. Events are on, as in production. The
// sizes are measured in alternating rounds, so a change in the machine's
// load hits both.
//
//	go test -run '^$' -bench SendAsDataGrows -benchtime 200x -timeout 30m ./messages/
func BenchmarkSendAsDataGrows(b *testing.B) {
	sizes := []int{1_000, 100_000}
	envs := make([]*apitest.Env, len(sizes))
	to := `"channel":"sms","recipientPhone":"` + messages.SeedPhone + `"`
	dupBody := `{` + to + `,"body":"the same text again"}`
	var sentIDs []string
	for i, n := range sizes {
		e := apitest.New(b, apitest.Options{Events: true})
		messages.Seed(b, e.Store, e.WSID, n)
		// The first send creates the lead and finds the feeds' heads.
		first := e.Send(dupBody)
		if first.Status != http.StatusCreated {
			b.Fatalf("first send: %d %s", first.Status, first.Body)
		}
		m, _ := first.JSON()["message"].(map[string]any)
		id, _ := m["id"].(string)
		envs[i], sentIDs = e, append(sentIDs, id)
	}
	sent := 0
	for round := 1; round <= 3; round++ {
		for i, n := range sizes {
			e := envs[i]
			b.Run(fmt.Sprintf("round%d/unique/messages=%d", round, n), func(b *testing.B) {
				for b.Loop() {
					sent++
					if r := e.Send(fmt.Sprintf(`{%s,"body":"unique message %d"}`, to, sent)); r.Status != http.StatusOK {
						b.Fatalf("unique send: %d %s", r.Status, r.Body)
					}
				}
			})
			b.Run(fmt.Sprintf("round%d/duplicate/messages=%d", round, n), func(b *testing.B) {
				for b.Loop() {
					if r := e.Send(dupBody); r.JSON()["duplicateOnly"] != true {
						b.Fatalf("not a duplicate: %d %s", r.Status, r.Body)
					}
				}
			})
			b.Run(fmt.Sprintf("round%d/get/messages=%d", round, n), func(b *testing.B) {
				for b.Loop() {
					if r := e.Do(http.MethodGet, "/api/messages/"+sentIDs[i], e.Key, "", nil); r.Status != http.StatusOK {
						b.Fatalf("get: %d %s", r.Status, r.Body)
					}
				}
			})
		}
	}
}
