package openapi

import (
	"encoding/json"
	"testing"
)

// A workspace's settings say null for "the server's value". OpenAPI 3.0.3
// allows null only where the schema says so at every level: a schema reached
// through allOf (Duration, RateLimit, QuietHours) must be nullable itself.
// The nullable enums (pendingStatus, refusedStatus, answerProfile) keep null
// out of their value lists, where code generators refuse it
// (.redocly.lint-ignore.yaml has why). These cases pin what the document
// accepts and refuses through kin-openapi, the contract tests' validator;
// Redocly checks the document's examples in .ci/run (redocly.yaml).
func TestWorkspaceSettingsNulls(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"WorkspaceSettings", "WorkspaceSettingsPatch"} {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			t.Fatalf("no schema %s", name)
		}
		schema := ref.Value
		full := `{"dedupWindow":"15m","dedupWait":"3s","rateLimit":{"perSecond":5,"burst":10},"defaultRegion":"GB",
			"optOutReply":"You are unsubscribed.","pendingStatus":429,"refusedStatus":422,"answerProfile":"hubspot",
			"quietHours":{"start":"21:00","end":"08:00","mode":"defer","timeZone":"America/New_York"}}`
		nulls := `{"dedupWindow":null,"dedupWait":null,"rateLimit":null,"defaultRegion":null,"optOutReply":null,
			"pendingStatus":null,"refusedStatus":null,"answerProfile":null,"quietHours":null}`
		for _, c := range []struct {
			doc   string
			valid bool
		}{
			{full, true},
			{nulls, true},
			{`{"pendingStatus":201}`, false},
			{`{"refusedStatus":409}`, false},
			{`{"answerProfile":"salesforce"}`, false},
			{`{"dedupWait":"3 seconds"}`, false},
			{`{"rateLimit":{"perSecond":0,"burst":10}}`, false},
			{`{"quietHours":{"start":"21:00"}}`, false},
		} {
			var v map[string]any
			if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
				t.Fatal(err)
			}
			if name == "WorkspaceSettings" && !c.valid {
				// Every member is required there: fill the others from nulls.
				var base map[string]any
				if err := json.Unmarshal([]byte(nulls), &base); err != nil {
					t.Fatal(err)
				}
				for k, x := range v {
					base[k] = x
				}
				v = base
			}
			err := schema.VisitJSON(v)
			if c.valid && err != nil {
				t.Errorf("%s: %s refused: %v", name, c.doc, err)
			}
			if !c.valid && err == nil {
				t.Errorf("%s: %s accepted", name, c.doc)
			}
		}
	}
}
