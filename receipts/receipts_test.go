package receipts

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// Receipts racing each other, repeated and out of order, leave the message
// at the highest status, with one event per status reached.
func TestReceiptsConverge(t *testing.T) {
	colls := append(append(append([]store.Collection{}, messages.Collections...), notify.Collections...), Collections...)
	st := storetest.New(t, colls...)
	ms := messages.NewStore(st)
	ob := notify.New(notify.Options{Store: st, Log: zerolog.Nop()})
	ms.OnOutcome(ob)
	h := New(Options{Store: st, Messages: ms, OnStatus: ob.RecordMessage})
	ctx := context.Background()

	tests := []struct {
		name     string
		start    string
		receipts []string
		want     string
		events   []string
	}{
		{"out of order", messages.StatusSent, []string{messages.StatusDelivered, messages.StatusSent, messages.StatusDelivered, messages.StatusSent}, messages.StatusDelivered, []string{notify.TypeMessageSent, notify.TypeMessageDelivered}},
		{"before the send outcome", messages.StatusSending, []string{messages.StatusSent, messages.StatusUndelivered, messages.StatusUndelivered}, messages.StatusUndelivered, []string{notify.TypeMessageSent, notify.TypeMessageUndelivered}},
		{"after a failure", messages.StatusFailed, []string{messages.StatusDelivered, messages.StatusDelivered}, messages.StatusFailed, nil},
		{"read after delivered", messages.StatusSent, []string{messages.StatusRead, messages.StatusDelivered, messages.StatusRead}, messages.StatusRead, []string{notify.TypeMessageDelivered}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := messages.Message{ID: "msg_r" + string(rune('a'+i)), WorkspaceID: "ws_a", Direction: "outbound", Channel: "sms", Status: tt.start, Provider: "twilio"}
			if err := ms.Insert(ctx, &m); err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			var wg sync.WaitGroup
			for _, st := range tt.receipts {
				wg.Go(func() {
					<-gate
					if _, err := h.Apply(ctx, Receipt{MessageID: m.ID, Provider: "twilio", VendorID: "SM1", Status: st, At: time.Now()}); err != nil {
						t.Error(err)
					}
				})
			}
			close(gate)
			wg.Wait()
			got, _, err := ms.Get(ctx, m.ID)
			if err != nil || got.Status != tt.want {
				t.Errorf("status %q (%v), want %q", got.Status, err, tt.want)
			}
			for _, typ := range notify.Types {
				n, _ := st.Collection("outbox_pending").CountDocuments(ctx, bson.D{{Key: "_id", Value: notify.EventID("ws_a", typ, m.ID)}})
				want := int64(0)
				for _, e := range tt.events {
					if e == typ {
						want = 1
					}
				}
				if n != want {
					t.Errorf("%s events: %d, want %d", typ, n, want)
				}
			}
		})
	}
	if _, err := h.Apply(ctx, Receipt{MessageID: "msg_nope", Provider: "twilio", Status: messages.StatusDelivered}); err == nil {
		t.Error("a receipt for an unknown message was accepted")
	}
}

// A receipt moves only a message sent through its provider, and only when
// it names the provider id the send got: a Twilio receipt does not touch a
// log-provider message, and a receipt naming message B with message A's
// MessageSid changes neither B's status nor its provider id.
func TestReceiptBoundToProviderAndID(t *testing.T) {
	colls := append(append([]store.Collection{}, messages.Collections...), Collections...)
	st := storetest.New(t, colls...)
	ms := messages.NewStore(st)
	h := New(Options{Store: st, Messages: ms})
	ctx := context.Background()
	logMsg := messages.Message{ID: "msg_log", WorkspaceID: "ws_a", Direction: "outbound", Channel: "sms", Status: messages.StatusSent, Provider: "log"}
	b := messages.Message{ID: "msg_b", WorkspaceID: "ws_a", Direction: "outbound", Channel: "sms", Status: messages.StatusSent, Provider: "twilio", ProviderMessageID: "SMbbbb"}
	for _, m := range []*messages.Message{&logMsg, &b} {
		if err := ms.Insert(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []Receipt{
		{MessageID: "msg_log", Provider: "twilio", VendorID: "SMaaaa", Status: messages.StatusDelivered},
		{MessageID: "msg_b", Provider: "twilio", VendorID: "SMaaaa", Status: messages.StatusUndelivered},
		{MessageID: "msg_b", Provider: "twilio", Status: messages.StatusUndelivered},
		{MessageID: "msg_b", Provider: "webhook", VendorID: "SMbbbb", Status: messages.StatusUndelivered},
	} {
		if _, err := h.Apply(ctx, r); err == nil {
			t.Errorf("Apply(%+v) accepted, want refused", r)
		}
	}
	for _, want := range []messages.Message{logMsg, b} {
		got, _, _ := ms.Get(ctx, want.ID)
		if got.Status != want.Status || got.ProviderMessageID != want.ProviderMessageID {
			t.Errorf("%s: status %q provider id %q, want %q %q", want.ID, got.Status, got.ProviderMessageID, want.Status, want.ProviderMessageID)
		}
	}
	// The matching receipt applies.
	if out, err := h.Apply(ctx, Receipt{MessageID: "msg_b", Provider: "twilio", VendorID: "SMbbbb", Status: messages.StatusDelivered}); err != nil || out.Status != messages.StatusDelivered {
		t.Errorf("the matching receipt: %+v %v, want delivered", out, err)
	}
}
