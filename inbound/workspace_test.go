package inbound_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/workspace"
)

// Deliveries to an unknown workspace cost the store one read per distinct
// id, then nothing; to a disabled workspace they are refused and record
// nothing until it is enabled again.
func TestUnknownAndDisabledWorkspaces(t *testing.T) {
	e := newEnv(t, envOpts{})
	unknown := msgapi.NewID("ws")
	d := delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(5150, 7, "hi"), path: "/api/webhooks/" + unknown + "/telegram"}
	for i, want := range []int64{1, 0, 0} {
		before := e.st.RoundTrips.Total()
		assertProblem(t, e.deliver(d), http.StatusUnauthorized, "unauthorized")
		if n := e.st.RoundTrips.Total() - before; n != want {
			t.Errorf("delivery %d to an unknown workspace: %d round trips, want %d", i+1, n, want)
		}
	}
	before := e.st.RoundTrips.Total()
	assertProblem(t, e.deliver(delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(5151, 7, "hi"), path: "/api/webhooks/not-a-workspace-id/telegram"}), http.StatusNotFound, "not_found")
	if n := e.st.RoundTrips.Total() - before; n != 0 {
		t.Errorf("a malformed workspace id: %d round trips, want 0", n)
	}

	wss := workspace.NewStore(e.st, 0)
	if _, err := wss.SetDisabled(context.Background(), e.wsID, true); err != nil {
		t.Fatal(err)
	}
	ok := delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(5152, 7, "while disabled")}
	assertProblem(t, e.deliver(ok), http.StatusUnauthorized, "unauthorized")
	if n := e.count("messages"); n != 0 {
		t.Errorf("a disabled workspace recorded %d messages, want 0", n)
	}
	if _, err := wss.SetDisabled(context.Background(), e.wsID, false); err != nil {
		t.Fatal(err)
	}
	if r := e.deliver(ok); r.status != http.StatusOK {
		t.Errorf("enabled again: %s, want 200", r)
	}
}
