package main

import (
	"context"
	"testing"
	"time"

	"github.com/msgapi/msgapi/sender"
)

// The receiver records a call msgapi's own webhook provider signs, under a
// Standard Webhooks secret (webhook-signature) and under a legacy one
// (X-Msgapi-Signature too), and refuses a call signed with another secret;
// each provider mode gives msgapi the answer the nemesis means.
func TestReceiverVerifiesAndActsAsTheProvider(t *testing.T) {
	const std = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		name, recvSecret, sendSecret, mode string
		wantRecorded, wantBad              int
		want                               sender.Status
	}{
		{"standard webhooks", std, std, modeOK, 1, 0, sender.Sent},
		{"legacy secret", "legacy-secret", "legacy-secret", modeOK, 1, 0, sender.Sent},
		{"wrong secret", std, "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", modeOK, 0, 1, sender.Failed},
		{"4xx", std, std, mode4xx, 1, 0, sender.Failed},
		{"5xx", std, std, mode5xx, 1, 0, sender.Unknown},
		{"hang", std, std, modeHang, 1, 0, sender.Unknown},
		{"slow", std, std, modeSlow, 1, 0, sender.Sent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			r, err := startReceiver(tc.recvSecret, timeout)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			r.setMode(tc.mode)
			w, err := sender.NewWebhook(sender.WebhookOptions{URL: r.url(), Secret: tc.sendSecret, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			res := w.Send(context.Background(), sender.Message{ID: "msg_chaos1", WorkspaceID: "ws_1", Channel: "sms", RecipientPhone: "+15550000001", Body: "hi"})
			got, bad := r.deliveries()
			if res.Status != tc.want || len(got) != tc.wantRecorded || bad != tc.wantBad {
				t.Fatalf("send %s (%s), recorded %d, bad %d; want %s, %d, %d", res.Status, res.Error, len(got), bad, tc.want, tc.wantRecorded, tc.wantBad)
			}
			if len(got) == 1 && (got[0].MessageID != "msg_chaos1" || got[0].Body != "hi" || got[0].Recipient != "+15550000001" || got[0].Outcome != tc.mode) {
				t.Errorf("recorded %+v", got[0])
			}
		})
	}
}
