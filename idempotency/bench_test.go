package idempotency_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/msgapi/msgapi/idempotency"
)

// benchBodies are a typical send and one with metadata near its 16 KiB limit,
// written with unsorted keys and spaces so canonicalisation has work to do.
func benchBodies(b *testing.B) map[string][]byte {
	small := []byte(`{"recipientPhone": "+1 (555) 010-0000", "channel": "sms",
		"body": "Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out.",
		"ghlContactId": "c_12345", "metadata": {"workflow": "reminder", "step": 3}}`)
	meta := map[string]any{}
	for i := 0; len(benchJSON(b, meta)) < 16000; i++ {
		meta[fmt.Sprintf("field_%04d", i)] = map[string]any{"value": fmt.Sprintf("value number %d", i), "n": i, "ok": i%2 == 0}
	}
	large := benchJSON(b, map[string]any{
		"channel": "sms", "recipientPhone": "+15550100000",
		"body": "Your appointment is confirmed for tomorrow at 3pm.", "metadata": meta,
	})
	return map[string][]byte{"small": small, "16KiB": large}
}

func benchJSON(b *testing.B, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// Fingerprint runs on every request that carries an Idempotency-Key,
// replays included, where it is the main CPU cost next to one store read.
func BenchmarkFingerprint(b *testing.B) {
	bodies := benchBodies(b)
	for _, name := range []string{"small", "16KiB"} {
		body := bodies[name]
		b.Run(fmt.Sprintf("%s-%dB", name, len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				idempotency.Fingerprint("POST", "/api/messages", body)
			}
		})
	}
}
