package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi/api/apitest"
)

// The read API over HTTP: what a send wrote is listed, found and paged.
func TestReadAPI(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	get := func(path string) apitest.Response {
		t.Helper()
		return e.Do(http.MethodGet, path, e.Key, "", nil)
	}
	var ids []string // newest last
	var leadID, convID string
	for _, body := range []string{
		`{"channel":"sms","recipientPhone":"+1 (555) 010-0000","body":"one","ghlContactId":"g-1"}`,
		`{"channel":"email","recipientEmail":"Ann@Example.com","body":"two"}`,
		`{"channel":"sms","recipientPhone":"+15550100000","body":"three"}`,
	} {
		r := e.Send(body)
		if r.Status != http.StatusCreated && r.Status != http.StatusOK {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		m := r.JSON()["message"].(map[string]any)
		ids = append(ids, m["id"].(string))
		if m["channel"] == "sms" {
			leadID, convID = m["leadId"].(string), m["conversationId"].(string)
		}
	}

	listIDs := func(r apitest.Response) []string {
		t.Helper()
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		var out []string
		for _, m := range r.JSON()["data"].([]any) {
			out = append(out, m.(map[string]any)["id"].(string))
		}
		return out
	}
	// Newest first, paged by the opaque cursor.
	p1 := get("/api/messages?limit=2")
	if diff := cmp.Diff([]string{ids[2], ids[1]}, listIDs(p1)); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	j := p1.JSON()
	if j["success"] != true || j["hasMore"] != true {
		t.Fatalf("first page: %s", p1.Body)
	}
	p2 := get("/api/messages?limit=2&cursor=" + url.QueryEscape(j["nextCursor"].(string)))
	if diff := cmp.Diff([]string{ids[0]}, listIDs(p2)); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	if j := p2.JSON(); j["hasMore"] != false || j["nextCursor"] != nil {
		t.Errorf("last page: hasMore %v nextCursor %v, want false, null", j["hasMore"], j["nextCursor"])
	}
	// The listed message is the message GET /api/messages/{id} answers.
	one := get("/api/messages/" + ids[0]).JSON()["message"]
	if diff := cmp.Diff(one, p2.JSON()["data"].([]any)[0]); diff != "" {
		t.Errorf("listed vs GET (-get +listed):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[2], ids[0]}, listIDs(get("/api/messages?leadId="+leadID))); diff != "" {
		t.Errorf("by lead (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[1]}, listIDs(get("/api/messages?channel=email&direction=outbound&status=sent"))); diff != "" {
		t.Errorf("by channel (-want +got):\n%s", diff)
	}

	// Leads: by id, and by phone or email normalised like a send.
	lead := get("/api/leads/" + leadID)
	if lead.Status != http.StatusOK {
		t.Fatalf("GET lead: %d %s", lead.Status, lead.Body)
	}
	l := lead.JSON()["lead"].(map[string]any)
	if l["id"] != leadID || l["phone"] != "+15550100000" || l["email"] != nil || l["ghlContactId"] != "g-1" {
		t.Errorf("lead %v", l)
	}
	for _, q := range []string{"phone=" + url.QueryEscape("(555) 010-0000"), "phone=%2B15550100000"} {
		if got := get("/api/leads?" + q).JSON()["data"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != leadID {
			t.Errorf("leads?%s: %v, want the lead %s", q, got, leadID)
		}
	}
	if got := get("/api/leads?email=ANN%40example.COM").JSON()["data"].([]any); len(got) != 1 || got[0].(map[string]any)["email"] != "ann@example.com" {
		t.Errorf("leads by email: %v", got)
	}
	if got := get("/api/leads?phone=%2B15550100099").JSON(); len(got["data"].([]any)) != 0 || got["hasMore"] != false {
		t.Errorf("unknown phone: %v, want an empty list", got)
	}

	// The conversation with its messages.
	conv := get("/api/conversations/" + convID + "?limit=1")
	if conv.Status != http.StatusOK {
		t.Fatalf("GET conversation: %d %s", conv.Status, conv.Body)
	}
	cj := conv.JSON()
	page := cj["messages"].(map[string]any)
	if cj["conversation"].(map[string]any)["leadId"] != leadID || len(page["data"].([]any)) != 1 || page["hasMore"] != true {
		t.Fatalf("conversation: %s", conv.Body)
	}
	// Its cursor pages GET /api/messages?conversationId= too: one listing.
	rest := get("/api/messages?conversationId=" + convID + "&cursor=" + url.QueryEscape(page["nextCursor"].(string)))
	if diff := cmp.Diff([]string{ids[0]}, listIDs(rest)); diff != "" {
		t.Errorf("conversation page 2 (-want +got):\n%s", diff)
	}

	// Errors.
	for _, tc := range []struct {
		path       string
		status     int
		wantFields []string
	}{
		{"/api/messages?limit=0&direction=up&since=today", 400, []string{"direction", "limit", "since"}},
		{"/api/messages?cursor=nope", 400, []string{"cursor"}},
		{"/api/messages?leadId=" + leadID + "&cursor=" + url.QueryEscape(j["nextCursor"].(string)), 400, []string{"cursor"}},
		{"/api/messages?lead_id=x", 400, []string{"lead_id"}},
		{"/api/leads", 400, []string{"phone"}},
		{"/api/leads?phone=1&email=a%40b.co", 400, []string{"phone"}},
		{"/api/leads?phone=not-a-phone", 400, []string{"phone"}},
		{"/api/leads?email=nope", 400, []string{"email"}},
		{"/api/leads?name=x", 400, []string{"name"}},
		{"/api/conversations/" + convID + "?limit=1000", 400, []string{"limit"}},
		{"/api/leads/lead_00000000000000000000000000000000", 404, nil},
		{"/api/conversations/conv_00000000000000000000000000000000", 404, nil},
	} {
		r := get(tc.path)
		if r.Status != tc.status || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %s, want %d problem+json", tc.path, r.Status, r.Header.Get("Content-Type"), r.Body, tc.status)
			continue
		}
		var got []string
		if errs, ok := r.JSON()["errors"].([]any); ok {
			for _, fe := range errs {
				got = append(got, fe.(map[string]any)["field"].(string))
			}
		}
		if diff := cmp.Diff(tc.wantFields, got); diff != "" {
			t.Errorf("%s: fields (-want +got):\n%s", tc.path, diff)
		}
	}

	// Another workspace sees nothing of these.
	other := apitest.New(t, apitest.Options{Store: e.Store})
	var out struct{ WorkspaceID, APIKey string }
	other.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&out)
	for _, path := range []string{"/api/leads/" + leadID, "/api/conversations/" + convID} {
		if r := other.Do(http.MethodGet, path, out.APIKey, "", nil); r.Status != http.StatusNotFound {
			t.Errorf("another workspace GET %s: %d, want 404", path, r.Status)
		}
	}
	for _, path := range []string{"/api/messages", "/api/messages?leadId=" + leadID, "/api/leads?phone=%2B15550100000"} {
		r := other.Do(http.MethodGet, path, out.APIKey, "", nil)
		if d, _ := r.JSON()["data"].([]any); r.Status != http.StatusOK || len(d) != 0 {
			t.Errorf("another workspace GET %s: %d %s, want 200 and no data", path, r.Status, r.Body)
		}
	}
	if r := e.Do(http.MethodGet, "/api/messages", "", "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", r.Status)
	}
}
