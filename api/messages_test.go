package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi/sender"
)

var crmKeys = []string{"leadId", "ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId"}

func TestSendEachChannel(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	tests := []struct {
		name, body           string
		wantPhone, wantEmail any
		wantChannel          string
	}{
		{"sms", `{"channel":"sms","recipientPhone":"+1 (555) 010-0000","body":"Hello","ghlContactId":"g1","ghlLocationId":"loc1"}`, "+15550100000", nil, "sms"},
		{"imessage by phone", `{"channel":"imessage","recipientPhone":"555-010-0009","body":"Hi there"}`, "+15550100009", nil, "imessage"},
		{"imessage by email", `{"channel":"imessage","recipientEmail":"Ann@Example.com","body":"Hi there"}`, nil, "ann@example.com", "imessage"},
		{"email", `{"channel":"email","recipientEmail":"Bob@Example.COM","subject":"Welcome","body":"Hello Bob","metadata":{"n":1,"deep":{"x":[1,2.5]}}}`, nil, "bob@example.com", "email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Send(tt.body)
			if r.Status != http.StatusCreated {
				t.Fatalf("status %d %s, want 201 (new lead)", r.Status, r.Body)
			}
			got := r.JSON()
			for _, k := range append([]string{"success", "status", "message"}, crmKeys...) {
				if _, ok := got[k]; !ok {
					t.Errorf("key %q missing from %s", k, r.Body)
				}
			}
			if got["success"] != true || got["status"] != "sent" {
				t.Errorf("success=%v status=%v, want true, sent", got["success"], got["status"])
			}
			m := got["message"].(map[string]any)
			if m["recipientPhone"] != tt.wantPhone || m["recipientEmail"] != tt.wantEmail || m["channel"] != tt.wantChannel {
				t.Errorf("message recipients %v/%v channel %v, want %v/%v %v", m["recipientPhone"], m["recipientEmail"], m["channel"], tt.wantPhone, tt.wantEmail, tt.wantChannel)
			}
			if m["leadId"] != got["leadId"] || m["status"] != "sent" || m["providerMessageId"] != "p-"+m["id"].(string) {
				t.Errorf("message = %v", m)
			}
			// GET returns the same message.
			g := e.Do(http.MethodGet, "/api/messages/"+m["id"].(string), e.Key, "", nil)
			if g.Status != http.StatusOK {
				t.Fatalf("GET: %d %s", g.Status, g.Body)
			}
			if diff := cmp.Diff(m, g.JSON()["message"]); diff != "" {
				t.Errorf("GET message differs from the send answer (-send +get):\n%s", diff)
			}
		})
	}
	if n := e.Sender.Count(); n != len(tests) {
		t.Errorf("sender saw %d messages, want %d", n, len(tests))
	}
	// The CRM references were stored on the lead and are echoed back on the
	// next send to the same lead, which answers 200 (existing lead).
	r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"Second message"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("second send to the same lead: %d, want 200", r.Status)
	}
	if got := r.JSON(); got["ghlContactId"] != "g1" || got["ghlLocationId"] != "loc1" || got["hsContactId"] != nil {
		t.Errorf("CRM keys = %v/%v/%v, want g1/loc1/null", got["ghlContactId"], got["ghlLocationId"], got["hsContactId"])
	}
}

func TestGetMessageIsWorkspaceScoped(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	id := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"x"}`).JSON()["message"].(map[string]any)["id"].(string)
	var other struct{ APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)
	r := e.Do(http.MethodGet, "/api/messages/"+id, other.APIKey, "", nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("another workspace's message: %d, want 404", r.Status)
	}
	assertProblem(t, r, "not_found")
}

func TestSendByLeadID(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	lead := e.Send(`{"channel":"email","recipientEmail":"c@example.com","body":"first"}`).JSON()["leadId"].(string)
	r := e.Send(fmt.Sprintf(`{"channel":"email","leadId":%q,"body":"second"}`, lead))
	if r.Status != http.StatusOK {
		t.Fatalf("send by leadId: %d %s", r.Status, r.Body)
	}
	if got := r.JSON()["message"].(map[string]any)["recipientEmail"]; got != "c@example.com" {
		t.Errorf("recipient filled from the lead = %v", got)
	}
	// The lead has no phone: an sms to it names the missing field.
	r = e.Send(fmt.Sprintf(`{"channel":"sms","leadId":%q,"body":"third"}`, lead))
	if r.Status != http.StatusBadRequest {
		t.Fatalf("sms to a lead without phone: %d %s", r.Status, r.Body)
	}
	assertProblem(t, r, "invalid_request")
}

func TestValidationWritesNothing(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	tests := []struct {
		name, body, ctype string
		status            int
		code              string
		fields            []string
	}{
		{"malformed JSON", `{"channel":`, "application/json", 400, "invalid_request", nil},
		{"not JSON", `channel=sms`, "application/x-www-form-urlencoded", 415, "unsupported_media_type", nil},
		{"every bad field at once", `{"channel":"fax","recipientPhone":"nope","recipientEmail":"@@","body":"","attachments":[{"url":"http://x"}]}`, "application/json", 400, "invalid_request",
			[]string{"channel", "recipientPhone", "recipientEmail", "body", "attachments[0].url"}},
		{"sms without phone", `{"channel":"sms","body":"x"}`, "application/json", 400, "invalid_request", []string{"recipientPhone"}},
		{"email without email", `{"channel":"email","body":"x"}`, "application/json", 400, "invalid_request", []string{"recipientEmail"}},
		{"sms too long", `{"channel":"sms","recipientPhone":"+15550100000","body":"` + strings.Repeat("a", 1601) + `"}`, "application/json", 400, "invalid_request", []string{"body"}},
		{"unknown lead", `{"channel":"sms","leadId":"lead_nope","body":"x"}`, "application/json", 404, "lead_not_found", nil},
		{"body over 1 MiB", `{"channel":"email","recipientEmail":"a@b.co","body":"` + strings.Repeat("a", 1<<20) + `"}`, "application/json", 413, "request_too_large", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do(http.MethodPost, "/api/messages", e.Key, tt.body, map[string]string{"Content-Type": tt.ctype})
			if r.Status != tt.status {
				t.Fatalf("status %d (%s), want %d", r.Status, r.Body, tt.status)
			}
			p := assertProblem(t, r, tt.code)
			if tt.fields != nil {
				var got []string
				for _, f := range p["errors"].([]any) {
					got = append(got, f.(map[string]any)["field"].(string))
				}
				if diff := cmp.Diff(tt.fields, got); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
			}
		})
	}
	for _, coll := range []string{"leads", "conversations", "messages", "message_dedup_locks", "idempotency_keys"} {
		if n := e.CountDocs(coll); n != 0 {
			t.Errorf("%s holds %d documents after only invalid requests, want 0", coll, n)
		}
	}
	if n := e.Sender.Count(); n != 0 {
		t.Errorf("sender saw %d messages, want 0", n)
	}
}

// 50 concurrent requests for one new contact (different texts, so the
// duplicate guard lets each through) create one lead and one conversation.
func TestConcurrentNewContactOneLead(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	statuses := make([]int, n)
	leads := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			r := e.Send(fmt.Sprintf(`{"channel":"sms","recipientPhone":"+15550100777","body":"message %d"}`, i))
			statuses[i] = r.Status
			if r.Status < 300 {
				leads[i], _ = r.JSON()["leadId"].(string)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	created := 0
	for i, s := range statuses {
		if s == http.StatusCreated {
			created++
		} else if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
		if leads[i] != leads[0] {
			t.Errorf("request %d got lead %s, request 0 got %s", i, leads[i], leads[0])
		}
	}
	if created != 1 {
		t.Errorf("%d answers said 201 (lead created), want exactly 1", created)
	}
	if got := e.CountDocs("leads"); got != 1 {
		t.Errorf("%d leads, want 1", got)
	}
	if got := e.CountDocs("conversations"); got != 1 {
		t.Errorf("%d conversations, want 1", got)
	}
	if got := e.Sender.Count(); got != n {
		t.Errorf("sender saw %d messages, want %d (all texts differ)", got, n)
	}
}

func TestProviderOutcomes(t *testing.T) {
	for _, tt := range []struct {
		result sender.Result
		want   string
	}{
		{sender.Result{Status: sender.Failed, Error: "422 invalid number"}, "failed"},
		{sender.Result{Status: sender.Unknown, Error: "timeout"}, "unknown"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			e := apitest.New(t, apitest.Options{})
			e.Sender.Result = tt.result
			r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"x"}`)
			if r.Status != http.StatusCreated {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
			got := r.JSON()
			m := got["message"].(map[string]any)
			if got["status"] != tt.want || m["status"] != tt.want || m["error"] != tt.result.Error {
				t.Errorf("status %v / message %v, want %s with error", got["status"], m, tt.want)
			}
			stored := e.Do(http.MethodGet, "/api/messages/"+m["id"].(string), e.Key, "", nil).JSON()["message"].(map[string]any)
			if stored["status"] != tt.want {
				t.Errorf("stored status %v, want %s", stored["status"], tt.want)
			}
		})
	}
}
