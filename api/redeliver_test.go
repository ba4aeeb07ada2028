package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/notify"
)

// Manual redelivery is rate-limited per workspace: of 100 calls in a row
// only the burst passes, the rest are 429 with Retry-After; another
// workspace is not affected.
func TestRedeliverRateLimited(t *testing.T) {
	e := apitest.New(t, apitest.Options{Events: true})
	var other struct{ WorkspaceID, APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)
	ctx := context.Background()
	for _, ws := range []string{e.WSID, other.WorkspaceID} {
		if _, err := e.Outbox.Record(ctx, notify.Fact{WorkspaceID: ws, Type: notify.TypeMessageSent, SubjectID: "msg_1", Data: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/events/" + notify.EventID(e.WSID, notify.TypeMessageSent, "msg_1") + "/redeliver"
	accepted, limited := 0, 0
	for range 100 {
		switch r := e.Do(http.MethodPost, path, e.Key, "", nil); r.Status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			if r.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
	}
	if accepted > api.RedeliverBurst+2 || limited == 0 {
		t.Errorf("100 redeliveries: %d accepted, %d limited; want at most %d accepted", accepted, limited, api.RedeliverBurst+2)
	}
	otherPath := "/api/events/" + notify.EventID(other.WorkspaceID, notify.TypeMessageSent, "msg_1") + "/redeliver"
	if r := e.Do(http.MethodPost, otherPath, other.APIKey, "", nil); r.Status != http.StatusAccepted {
		t.Errorf("another workspace's redelivery: %d %s", r.Status, r.Body)
	}
}
