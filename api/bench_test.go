package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/send"
)

// Benchmarks of the send path. The handler benchmarks run a real server
// in-process on the embedded test store, one request at a time, and report
// the store round trips each request cost (storeRT/op) next to its time:
// the round trips are what the design budgets, the time is what one store
// round trip costs on this machine.
//
//	go test -run '^$' -bench . -benchtime 2s ./api/

func BenchmarkParseSendRequest(b *testing.B) {
	small := []byte(`{"channel":"sms","recipientPhone":"+1 (555) 010-0000","body":"Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out.","ghlContactId":"c_12345","metadata":{"workflow":"reminder","step":3}}`)
	meta := map[string]any{}
	for i := 0; len(benchJSON(b, meta)) < 16000; i++ {
		meta[fmt.Sprintf("field_%04d", i)] = map[string]any{"value": fmt.Sprintf("value number %d", i), "n": i, "ok": i%2 == 0}
	}
	large := benchJSON(b, map[string]any{
		"channel": "sms", "recipientPhone": "+15550100000",
		"body": "Your appointment is confirmed for tomorrow at 3pm.", "metadata": meta,
	})
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", small}, {"16KiB-metadata", large}} {
		b.Run(fmt.Sprintf("%s-%dB", bc.name, len(bc.body)), func(b *testing.B) {
			if _, err := send.ParseRequest(bc.body, "US"); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = send.ParseRequest(bc.body, "US")
			}
		})
	}
}

func benchJSON(b *testing.B, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkSend is POST /api/messages end to end over loopback HTTP.
func BenchmarkSend(b *testing.B) {
	const to = `"channel":"sms","recipientPhone":"+15550100000"`
	// loop runs send b.N times and reports the store round trips per request.
	loop := func(b *testing.B, e *apitest.Env, send func(i int) apitest.Response, ok func(apitest.Response) bool) {
		b.Helper()
		before, n := e.Store.RoundTrips.Total(), 0
		for b.Loop() {
			if r := send(n); !ok(r) {
				b.Fatalf("request %d: %d %s", n, r.Status, r.Body)
			}
			n++
		}
		b.ReportMetric(float64(e.Store.RoundTrips.Total()-before)/float64(n), "storeRT/op")
	}
	isDuplicate := func(r apitest.Response) bool {
		return r.Status == http.StatusOK && bytes.Contains(r.Body, []byte(`"duplicateOnly":true`))
	}

	b.Run("unique", func(b *testing.B) {
		e := apitest.New(b, apitest.Options{})
		if r := e.Send(`{` + to + `,"body":"creates the lead"}`); r.Status != http.StatusCreated {
			b.Fatalf("first send: %d %s", r.Status, r.Body)
		}
		loop(b, e, func(i int) apitest.Response {
			return e.Send(fmt.Sprintf(`{%s,"body":"unique message %d"}`, to, i))
		}, func(r apitest.Response) bool { return r.Status == http.StatusOK && !isDuplicate(r) })
		if got, want := e.Sender.Count(), b.N+1; got != want {
			b.Errorf("sender saw %d messages, want %d", got, want)
		}
	})

	b.Run("duplicate", func(b *testing.B) {
		e := apitest.New(b, apitest.Options{})
		body := `{` + to + `,"body":"the same text again"}`
		if r := e.Send(body); r.Status != http.StatusCreated {
			b.Fatalf("first send: %d %s", r.Status, r.Body)
		}
		loop(b, e, func(int) apitest.Response { return e.Send(body) }, isDuplicate)
		if got := e.Sender.Count(); got != 1 {
			b.Errorf("sender saw %d messages, want 1", got)
		}
	})

	b.Run("idempotency-replay", func(b *testing.B) {
		e := apitest.New(b, apitest.Options{})
		body := `{` + to + `,"body":"sent under a key"}`
		hdr := map[string]string{"Idempotency-Key": "bench-replay-1"}
		first := e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
		if first.Status != http.StatusCreated {
			b.Fatalf("first send: %d %s", first.Status, first.Body)
		}
		loop(b, e, func(int) apitest.Response {
			return e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
		}, func(r apitest.Response) bool {
			return r.Header.Get("Idempotent-Replayed") == "true" && bytes.Equal(r.Body, first.Body)
		})
		if got := e.Sender.Count(); got != 1 {
			b.Errorf("sender saw %d messages, want 1", got)
		}
	})
}
