package hubspot

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestSendBody(t *testing.T) {
	r, err := ParseRequest([]byte(`{"callbackId":"ap-1-2-3","origin":{"portalId":4242},"object":{"objectId":615,"objectType":"CONTACT"},` +
		`"inputFields":{"channel":"email","email":"lead@example.com","phone":"","body":"Hi","subject":"Hello"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.SendBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	want := map[string]any{"channel": "email", "recipientEmail": "lead@example.com", "body": "Hi", "subject": "Hello", "hsContactId": "615", "hsPortalId": "4242"}
	if len(got) != len(want) {
		t.Fatalf("send body %s, want %v (the empty phone left out)", b, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	r.InputFields["fax"] = "1"
	if _, err := r.SendBody(); err == nil || !strings.Contains(err.Error(), "inputFields.fax") {
		t.Errorf("an unknown input: %v, want an error naming it", err)
	}
	for _, bad := range []string{`{}`, `{"callbackId":" "}`, `{"callbackId":"a\u0001b"}`, `[1]`, `{"callbackId":"` + strings.Repeat("x", 201) + `"}`} {
		if _, err := ParseRequest([]byte(bad)); err == nil {
			t.Errorf("ParseRequest(%s) accepted", bad)
		}
	}
}

func TestState(t *testing.T) {
	for _, c := range []struct {
		a    Answer
		want string
	}{
		{Answer{Status: "sent"}, StateSuccess},
		{Answer{Status: "delivered", DuplicateOnly: true}, StateSuccess},
		{Answer{Status: "read"}, StateSuccess},
		{Answer{Status: "failed"}, StateFailContinue},
		{Answer{Status: "suppressed"}, StateFailContinue},
		{Answer{Status: "unknown"}, StateFailContinue},
		{Answer{Status: "undelivered"}, StateFailContinue},
		{Answer{Status: "sending", DuplicateOnly: true}, StateBlock},
		{Answer{Status: "pending", Pending: true}, StateBlock},
	} {
		if got := State(c.a); got != c.want {
			t.Errorf("State(%+v) = %s, want %s", c.a, got, c.want)
		}
	}
	if o := Outputs(Answer{Status: "sending", DuplicateOnly: true, MessageID: "msg_1"}); o["hs_expiration_duration"] != BlockExpiration {
		t.Errorf("a BLOCK's outputs %v lack hs_expiration_duration", o)
	}
}

// The action definition users register with HubSpot names exactly the
// inputs SendBody maps and the outputs Outputs and Failure answer, and
// its actionUrl is the route.
func TestActionDefinition(t *testing.T) {
	b, err := os.ReadFile("../deploy/hubspot/action.json")
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		ActionURL   string `json:"actionUrl"`
		ObjectTypes []string
		InputFields []struct {
			TypeDefinition struct{ Name string } `json:"typeDefinition"`
		} `json:"inputFields"`
		OutputFields []struct {
			TypeDefinition struct{ Name string } `json:"typeDefinition"`
		} `json:"outputFields"`
		Labels map[string]struct {
			InputFieldLabels  map[string]string `json:"inputFieldLabels"`
			OutputFieldLabels map[string]string `json:"outputFieldLabels"`
		} `json:"labels"`
	}
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatal(err)
	}
	var ins, outs []string
	for _, f := range def.InputFields {
		ins = append(ins, f.TypeDefinition.Name)
		if def.Labels["en"].InputFieldLabels[f.TypeDefinition.Name] == "" {
			t.Errorf("input %s has no label", f.TypeDefinition.Name)
		}
	}
	for _, f := range def.OutputFields {
		outs = append(outs, f.TypeDefinition.Name)
		if def.Labels["en"].OutputFieldLabels[f.TypeDefinition.Name] == "" {
			t.Errorf("output %s has no label", f.TypeDefinition.Name)
		}
	}
	var wantIns, wantOuts []string
	for k := range inputNames {
		wantIns = append(wantIns, k)
	}
	for k := range Failure("x", "y") {
		if k != "hs_execution_state" {
			wantOuts = append(wantOuts, k)
		}
	}
	slices.Sort(ins)
	slices.Sort(outs)
	slices.Sort(wantIns)
	slices.Sort(wantOuts)
	if !slices.Equal(ins, wantIns) || !slices.Equal(outs, wantOuts) {
		t.Errorf("action.json inputs %v outputs %v; want %v and %v", ins, outs, wantIns, wantOuts)
	}
	for k := range Outputs(Answer{Status: "sent"}) {
		if k != "hs_execution_state" && !slices.Contains(outs, k) {
			t.Errorf("output %s is answered but not defined", k)
		}
	}
	if !strings.HasSuffix(def.ActionURL, "/actions/send") || !strings.Contains(def.ActionURL, "/integrations/hubspot/ws_") {
		t.Errorf("actionUrl %s is not the route /integrations/hubspot/{workspaceId}/actions/send", def.ActionURL)
	}
}
