package test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
)

// What event webhooks add to the send path, exactly: on the embedded
// engine nothing on a send (the event rides in the outcome's command, one
// transaction: store.InsertTogether), on MongoDB one insert (the event,
// before the outcome); one insert on a blocked duplicate. Delivery costs
// the send path nothing: it runs in the background dispatcher, which this
// server does not run.
func TestRoundTripBudgetsWithEvents(t *testing.T) {
	e := apitest.New(t, apitest.Options{Events: true})
	if r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"first, creates the lead"}`); r.Status != http.StatusCreated {
		t.Fatalf("first send: %d %s", r.Status, r.Body)
	}
	t.Run("new message to a known lead", func(t *testing.T) {
		n, by, colls := deltaInto(e.Store, func() {
			if r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"second"}`); r.Status != http.StatusOK {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		})
		budget, why := int64(6), "5 + the event insert"
		if e.Store.OneWriter() {
			budget, why = 5, "the event in the outcome's command"
		}
		if n > budget || by["find"] != 1 || by["insert"] < 3 || by["insert"] > budget-1 || by["update"] != 0 {
			t.Errorf("%d round trips %v, budget %d (%s): one read, 5 inserts (lock, message, index, event, outcome; those made at once may share one), no update", n, by, budget, why)
		}
		if want := []string{"message_dedup_locks", "message_index", "message_outcomes", "messages", "outbox_pending"}; !slices.Equal(colls, want) {
			t.Errorf("inserted into %v, want %v", colls, want)
		}
		t.Logf("new message to a known lead, with events: %d round trips %v", n, by)
	})
	t.Run("duplicate with the sibling present", func(t *testing.T) {
		n, by := delta(e.Store, func() {
			if r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"second"}`); r.JSON()["duplicateOnly"] != true {
				t.Fatalf("not a duplicate: %s", r.Body)
			}
		})
		if n > 3 || by["insert"] != 1 || by["update"] != 0 || by["delete"] != 0 {
			t.Errorf("%d round trips %v, budget 3 (2 reads + the event insert); the one write: the event insert", n, by)
		}
		t.Logf("duplicate, with events: %d round trips %v", n, by)
	})
	if n := e.CountDocs("outbox_pending"); n != 3 {
		t.Errorf("%d events recorded, want 3 (two message.sent, one message.duplicate_blocked)", n)
	}
}
