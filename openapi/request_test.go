package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/send"
)

// One source of truth for request validation: send.ParseRequest is
// the rule, and the SendRequest schema must say the same thing wherever a
// schema can. These tests feed the same bodies to both and hold them to
//
//   - the parser accepts ⇒ the schema accepts (a client that validates
//     against the document never refuses a request the server takes);
//   - the schema rejects ⇒ the parser rejects (the same, read backwards);
//   - the schema accepts but the parser rejects ⇒ every field the parser
//     names fails a rule the document lists as beyond a schema (a gap).

// gap is a request rule the schema cannot state. Its value is the phrase
// of the document's description that lists it (TestGapsDocumented).
type gap string

const (
	gapPhone          gap = "phone numbers must be valid"
	gapEmail          gap = "emails must be valid addresses"
	gapRecipient      gap = "the recipient each channel needs"
	gapSMSLength      gap = "an `sms` body is at most 1600 characters"
	gapSubjectChannel gap = "`subject` is for `email` only"
	gapPrintable      gap = "`leadId` is printable text"
	gapBytes          gap = "length limits count UTF-8 bytes"
	gapURL            gap = "attachment URLs must parse, with a host name"
	gapMediaType      gap = "`contentType` must be a valid media type"
	gapMetadata       gap = "`metadata` is at most 16 KiB"
	gapOnce           gap = "a member may appear only once"
	gapUnicode        gap = "text must be valid Unicode"
	gapOneValue       gap = "the body is one JSON object with nothing after it"
)

var allGaps = []gap{gapPhone, gapEmail, gapRecipient, gapSMSLength, gapSubjectChannel, gapPrintable,
	gapBytes, gapURL, gapMediaType, gapMetadata, gapOnce, gapUnicode, gapOneValue}

// gapOf names the gap a parser error belongs to, from its field and
// message; "" when the rule is one the schema states (then the two must
// agree). A new parser rule with a new message lands here as "" and fails
// the agreement until the schema or this list learns it.
func gapOf(fe msgapi.FieldError) gap {
	top := fe.Field
	if i := strings.IndexAny(top, "[."); i >= 0 {
		top = top[:i]
	}
	m := fe.Message
	switch {
	case m == "must appear only once":
		return gapOnce
	case strings.HasPrefix(m, "must be valid UTF-8"):
		return gapUnicode
	case top == "metadata" && m != "must be a JSON object":
		return gapMetadata
	case strings.HasPrefix(m, "invalid phone number"):
		if strings.Contains(m, "longer than") {
			return gapBytes
		}
		return gapPhone
	case strings.HasPrefix(m, "invalid email address"):
		if strings.Contains(m, "longer than") {
			return gapBytes
		}
		return gapEmail
	case strings.Contains(m, "is required for channel"):
		return gapRecipient
	case m == "must be at most 1600 characters for sms":
		return gapSMSLength
	case m == "is only allowed for channel email":
		return gapSubjectChannel
	case top == "leadId" && strings.Contains(m, "printable"):
		// One message covers both rules: 128 bytes, printable.
		return gapPrintable
	case strings.HasSuffix(m, " bytes") && strings.HasPrefix(m, "must be at most"):
		return gapBytes
	case strings.HasSuffix(fe.Field, ".url") && m == "must be an absolute https URL":
		return gapURL
	case strings.HasSuffix(fe.Field, ".contentType"):
		return gapMediaType
	}
	return ""
}

// topGap classifies an error without fields (the body as a whole).
func topGap(e *msgapi.Error) gap {
	if strings.HasPrefix(e.Message, "the request body is not valid JSON") {
		return gapOneValue // the schema validator reads the first value only
	}
	return ""
}

type validator struct {
	doc   *openapi3.T
	route *routers.Route
	body  *openapi3.RequestBody
}

func newValidator(t testing.TB) *validator {
	t.Helper()
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	item := doc.Paths.Value("/api/messages")
	op := item.Post
	return &validator{doc: doc, route: &routers.Route{Spec: doc, Path: "/api/messages", PathItem: item, Method: http.MethodPost, Operation: op}, body: op.RequestBody.Value}
}

// schema validates body as the request body of POST /api/messages.
func (v *validator) schema(body []byte) error {
	req, _ := http.NewRequest(http.MethodPost, "/api/messages", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	in := &openapi3filter.RequestValidationInput{Request: req, Route: v.route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	return openapi3filter.ValidateRequestBody(context.Background(), in, v.body)
}

// verdict compares the two on one body and returns what is wrong, or "".
// want is the gap the caller expects ("" for agreement).
//
//lint:ignore ST1008 the two errors are the verdicts under comparison, not a failure of verdict
func (v *validator) verdict(body []byte) (schemaErr, parseErr error, gaps map[gap]bool, problem string) {
	schemaErr = v.schema(body)
	_, parseErr = send.ParseRequest(body, "US")
	switch {
	case parseErr == nil && schemaErr != nil:
		return schemaErr, parseErr, nil, "send.ParseRequest accepts it but the schema rejects it"
	case parseErr != nil && schemaErr == nil:
		var e *msgapi.Error
		if !errors.As(parseErr, &e) {
			return schemaErr, parseErr, nil, "send.ParseRequest returned a non-domain error"
		}
		gaps = map[gap]bool{}
		if len(e.Fields) == 0 {
			g := topGap(e)
			if g == "" {
				return schemaErr, parseErr, gaps, "the parser rejects the body as a whole and the schema accepts it, for no documented reason"
			}
			gaps[g] = true
		}
		for _, fe := range e.Fields {
			g := gapOf(fe)
			if g == "" {
				return schemaErr, parseErr, gaps, "the schema accepts it but send.ParseRequest rejects " + fe.Field + " (" + fe.Message + ") for a rule the schema could state, or one the document does not list"
			}
			gaps[g] = true
		}
	}
	return schemaErr, parseErr, gaps, ""
}

func TestGapsDocumented(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range allGaps {
		if !strings.Contains(doc.Info.Description, string(g)) {
			t.Errorf("the document's description does not list the rule %q", g)
		}
	}
}

// bodyOf builds a request body from members, in order; a later value of a
// key replaces the earlier one in place (the "a member twice" case is
// written out by hand).
func bodyOf(kv ...any) string {
	var keys []string
	vals := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = kv[i+1]
	}
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(":")
		if raw, ok := vals[k].(json.RawMessage); ok {
			b.Write(raw)
			continue
		}
		v, _ := json.Marshal(vals[k])
		b.Write(v)
	}
	b.WriteString("}")
	return b.String()
}

func sms(kv ...any) string {
	return bodyOf(append([]any{"channel", "sms", "recipientPhone", "+15550100000", "body", "Hello"}, kv...)...)
}

func email(kv ...any) string {
	return bodyOf(append([]any{"channel", "email", "recipientEmail", "ann@example.com", "body", "Hello"}, kv...)...)
}

func att(kv ...any) json.RawMessage { return json.RawMessage(bodyOf(kv...)) }

func atts(n int, a json.RawMessage) json.RawMessage {
	items := make([]string, n)
	for i := range items {
		items[i] = string(a)
	}
	return json.RawMessage("[" + strings.Join(items, ",") + "]")
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

type agreementCase struct {
	name string
	body string
	ok   bool // send.ParseRequest accepts it
	gap  gap  // when set: the schema accepts, the parser rejects, for this documented rule
}

var agreementCases = []agreementCase{
	// Accepted by both.
	{name: "sms", body: sms(), ok: true},
	{name: "formatted phone", body: bodyOf("channel", "sms", "recipientPhone", "+1 (555) 010-0000", "body", "Hi"), ok: true},
	{name: "imessage by email", body: bodyOf("channel", "imessage", "recipientEmail", "Ann@Example.com", "body", "Hi"), ok: true},
	{name: "email, everything", ok: true, body: email("subject", "Invoice\tMarch", "attachments",
		atts(1, att("url", "https://files.example.com/a.pdf", "filename", "a.pdf", "contentType", "application/pdf; name=a.pdf")),
		"ghlContactId", "g1", "ghlLocationId", "l1", "hsContactId", "h1", "hsPortalId", "p1",
		"metadata", raw(`{"n":1,"deep":{"x":[1,2.5,{"y":null}]},"s":"é"}`))},
	{name: "lead only: the lead may have the recipient", body: bodyOf("channel", "sms", "leadId", "lead_x", "body", "Hi"), ok: true},
	{name: "nulls are absent", ok: true, body: sms("recipientEmail", nil, "leadId", nil, "subject", nil, "attachments", nil,
		"ghlContactId", nil, "ghlLocationId", nil, "hsContactId", nil, "hsPortalId", nil, "metadata", nil)},
	{name: "empty strings are absent", ok: true, body: sms("recipientEmail", "", "leadId", "", "subject", "", "ghlContactId", "")},
	{name: "unknown members are ignored", body: sms("priority", "high", "extra", raw(`{"a":[1]}`)), ok: true},
	{name: "body with spaces around text", body: sms("body", "  Hi \n"), ok: true},
	{name: "body of one non-space after Unicode spaces", body: sms("body", "\u00a0\u3000\u2028x"), ok: true},
	{name: "email body at 65536 bytes", body: email("body", strings.Repeat("a", 65536)), ok: true},
	{name: "sms body at 1600 characters", body: sms("body", strings.Repeat("é", 1600)), ok: true},
	{name: "10 attachments", body: sms("attachments", atts(10, att("url", "https://x.example/a"))), ok: true},
	{name: "upper-case HTTPS, IPv6 host, port, query", body: sms("attachments", atts(1, att("url", "HTTPS://[::1]:8443/a?b=c#d"))), ok: true},
	{name: "non-ASCII host and path", body: sms("attachments", atts(1, att("url", "https://exämple.com/ü"))), ok: true},
	{name: "@ in the path is not a credential", body: sms("attachments", atts(1, att("url", "https://x.example/@me"))), ok: true},
	{name: "filenames with dots", body: sms("attachments", raw(`[{"url":"https://x.example/a","filename":".x"},{"url":"https://x.example/a","filename":"a."},{"url":"https://x.example/a","filename":"..."},{"url":"https://x.example/a","filename":"a b.txt"}]`)), ok: true},
	{name: "attachment: unknown members, null filename", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", nil, "size", 3))), ok: true},
	{name: "CRM reference at 255", body: sms("hsPortalId", strings.Repeat("9", 255)), ok: true},
	{name: "HubSpot ids as numbers", body: sms("hsPortalId", 4411, "hsContactId", raw(`9007199254740991`)), ok: true},
	{name: "HubSpot id as an integral exponent", body: sms("hsContactId", raw(`4.2e1`), "hsPortalId", raw(`-0`)), ok: true},
	{name: "leadId at 128", body: sms("leadId", strings.Repeat("l", 128)), ok: true},
	{name: "subject at 998", body: email("subject", strings.Repeat("s", 998)), ok: true},
	{name: "url at 2048", body: sms("attachments", atts(1, att("url", "https://x.example/"+strings.Repeat("a", 2048-18)))), ok: true},
	{name: "empty metadata", body: sms("metadata", raw(`{}`)), ok: true},

	// Rejected by both.
	{name: "empty body", body: ""},
	{name: "null", body: "null"},
	{name: "array", body: "[]"},
	{name: "string", body: `"hi"`},
	{name: "truncated", body: `{"channel":"sms"`},
	{name: "no channel", body: bodyOf("recipientPhone", "+15550100000", "body", "Hi")},
	{name: "channel null", body: bodyOf("channel", nil, "recipientPhone", "+15550100000", "body", "Hi")},
	{name: "channel empty", body: bodyOf("channel", "", "recipientPhone", "+15550100000", "body", "Hi")},
	{name: "channel upper case", body: bodyOf("channel", "SMS", "recipientPhone", "+15550100000", "body", "Hi")},
	{name: "channel number", body: bodyOf("channel", 1, "recipientPhone", "+15550100000", "body", "Hi")},
	{name: "no body", body: bodyOf("channel", "sms", "recipientPhone", "+15550100000")},
	{name: "body null", body: sms("body", nil)},
	{name: "body empty", body: sms("body", "")},
	{name: "body blank", body: sms("body", " \t\r\n\v\f")},
	{name: "body of Unicode spaces", body: sms("body", "\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000")},
	{name: "body number", body: sms("body", 5)},
	{name: "email body over 65536 bytes", body: email("body", strings.Repeat("a", 65537))},
	{name: "phone number type", body: sms("recipientPhone", 15550100000)},
	{name: "phone over 64", body: sms("recipientPhone", "+1"+strings.Repeat("5", 63))},
	{name: "email over 254", body: email("recipientEmail", strings.Repeat("a", 64)+"@"+strings.Repeat("b", 186)+".com")},
	{name: "leadId over 128", body: sms("leadId", strings.Repeat("l", 129))},
	{name: "leadId with a control character", body: sms("leadId", "lead\u0007")},
	{name: "leadId number", body: sms("leadId", 7)},
	{name: "subject with a line break", body: email("subject", "Hi\r\nBcc: x@example.com")},
	{name: "subject with a C1 control", body: email("subject", "Hi\u0085")},
	{name: "subject over 998", body: email("subject", strings.Repeat("s", 999))},
	{name: "11 attachments", body: sms("attachments", atts(11, att("url", "https://x.example/a")))},
	{name: "attachments not an array", body: sms("attachments", "https://x.example/a")},
	{name: "attachment null", body: sms("attachments", raw(`[null]`))},
	{name: "attachment string", body: sms("attachments", raw(`["https://x.example/a"]`))},
	{name: "attachment without url", body: sms("attachments", atts(1, att("filename", "a.pdf")))},
	{name: "attachment url null", body: sms("attachments", atts(1, att("url", nil)))},
	{name: "attachment url empty", body: sms("attachments", atts(1, att("url", "")))},
	{name: "http url", body: sms("attachments", atts(1, att("url", "http://x.example/a")))},
	{name: "ftp url", body: sms("attachments", atts(1, att("url", "ftp://x.example/a")))},
	{name: "relative url", body: sms("attachments", atts(1, att("url", "/a.pdf")))},
	{name: "scheme-relative url", body: sms("attachments", atts(1, att("url", "//x.example/a")))},
	{name: "url without authority", body: sms("attachments", atts(1, att("url", "https:x.example/a")))},
	{name: "url without host", body: sms("attachments", atts(1, att("url", "https:///a")))},
	{name: "url with credentials", body: sms("attachments", atts(1, att("url", "https://u:p@x.example/a")))},
	{name: "url with a space", body: sms("attachments", atts(1, att("url", "https://x.example/a b")))},
	{name: "url with a no-break space", body: sms("attachments", atts(1, att("url", "https://x.example/a\u00a0b")))},
	{name: "url with an ideographic space", body: sms("attachments", atts(1, att("url", "https://x.example/a\u3000b")))},
	{name: "url over 2048", body: sms("attachments", atts(1, att("url", "https://x.example/"+strings.Repeat("a", 2048-17))))},
	{name: "filename with a slash", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", "a/b")))},
	{name: "filename with a backslash", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", `a\b`)))},
	{name: "filename dot", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", ".")))},
	{name: "filename dot dot", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", "..")))},
	{name: "filename with a control character", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", "a\u0001")))},
	{name: "filename over 255", body: sms("attachments", atts(1, att("url", "https://x.example/a", "filename", strings.Repeat("f", 256))))},
	{name: "content type without a slash", body: sms("attachments", atts(1, att("url", "https://x.example/a", "contentType", "png")))},
	{name: "content type with two slashes", body: sms("attachments", atts(1, att("url", "https://x.example/a", "contentType", "image/png/x")))},
	{name: "content type over 255", body: sms("attachments", atts(1, att("url", "https://x.example/a", "contentType", "image/"+strings.Repeat("p", 250))))},
	{name: "CRM reference with a tab", body: sms("ghlContactId", "g\t1")},
	{name: "CRM reference over 255", body: sms("ghlLocationId", strings.Repeat("9", 256))},
	{name: "CRM reference number", body: sms("ghlContactId", 42)},
	{name: "HubSpot id with a fraction", body: sms("hsContactId", raw(`1.5`))},
	{name: "HubSpot id negative", body: sms("hsPortalId", -1)},
	{name: "HubSpot id past 2^53-1", body: sms("hsPortalId", raw(`9007199254740993`))},
	{name: "HubSpot id beyond float64", body: sms("hsPortalId", raw(`1e400`))},
	{name: "HubSpot id boolean", body: sms("hsPortalId", true)},
	{name: "metadata string", body: sms("metadata", "x")},
	{name: "metadata array", body: sms("metadata", raw(`[]`))},

	// The schema accepts, the parser rejects: rules the document lists as
	// beyond a schema.
	{name: "not a phone number", body: sms("recipientPhone", "call me"), gap: gapPhone},
	{name: "not an email", body: email("recipientEmail", "ann at example"), gap: gapEmail},
	{name: "sms without a phone", body: bodyOf("channel", "sms", "recipientEmail", "ann@example.com", "body", "Hi"), gap: gapRecipient},
	{name: "email without an email", body: bodyOf("channel", "email", "recipientPhone", "+15550100000", "body", "Hi"), gap: gapRecipient},
	{name: "imessage without either", body: bodyOf("channel", "imessage", "body", "Hi"), gap: gapRecipient},
	{name: "sms body over 1600", body: sms("body", strings.Repeat("a", 1601)), gap: gapSMSLength},
	{name: "subject on sms", body: sms("subject", "Hi"), gap: gapSubjectChannel},
	{name: "leadId with a zero-width space", body: sms("leadId", "lead\u200b"), gap: gapPrintable},
	{name: "email body over 64 KiB in bytes", body: email("body", strings.Repeat("é", 40000)), gap: gapBytes},
	{name: "CRM reference over 255 bytes", body: sms("ghlContactId", strings.Repeat("é", 200)), gap: gapBytes},
	{name: "url without a host name", body: sms("attachments", atts(1, att("url", "https://:443/a"))), gap: gapURL},
	{name: "url with a bad escape", body: sms("attachments", atts(1, att("url", "https://x.example/%zz"))), gap: gapURL},
	{name: "content type with a bad parameter", body: sms("attachments", atts(1, att("url", "https://x.example/a", "contentType", "image/png; x"))), gap: gapMediaType},
	{name: "content type with a bad token", body: sms("attachments", atts(1, att("url", "https://x.example/a", "contentType", "ima ge/png"))), gap: gapMediaType},
	{name: "metadata key with $", body: sms("metadata", raw(`{"$where":1}`)), gap: gapMetadata},
	{name: "metadata key with a dot", body: sms("metadata", raw(`{"a.b":1}`)), gap: gapMetadata},
	{name: "metadata nested array", body: sms("metadata", raw(`{"a":[[1]]}`)), gap: gapMetadata},
	{name: "metadata over 16 KiB", body: sms("metadata", raw(`{"a":"`+strings.Repeat("x", 16<<10)+`"}`)), gap: gapMetadata},
	{name: "metadata number beyond float64", body: sms("metadata", raw(`{"a":1e400}`)), gap: gapMetadata},
	{name: "metadata 33 levels deep", body: sms("metadata", raw(strings.Repeat(`{"a":`, 33)+"1"+strings.Repeat("}", 33))), gap: gapMetadata},
	{name: "a member twice", body: `{"channel":"sms","recipientPhone":"+15550100000","body":"Hi","body":"Hi"}`, gap: gapOnce},
	{name: "unpaired surrogate", body: sms("body", raw(`"\ud800"`)), gap: gapUnicode},
	{name: "invalid UTF-8", body: "{\"channel\":\"sms\",\"recipientPhone\":\"+15550100000\",\"body\":\"\xff\"}", gap: gapUnicode},
	{name: "text after the object", body: sms() + ` {}`, gap: gapOneValue},

	// Only JSON's own white space may surround the object.
	{name: "non-JSON white space around the object", body: "\v\u00a0" + sms() + "\f", ok: false},
}

func TestSendRequestSchemaAgreesWithParser(t *testing.T) {
	v := newValidator(t)
	for _, tc := range agreementCases {
		t.Run(tc.name, func(t *testing.T) {
			schemaErr, parseErr, gaps, problem := v.verdict([]byte(tc.body))
			if problem != "" {
				t.Fatalf("%s\n schema: %v\n parser: %v\n body: %.300s", problem, schemaErr, parseErr, tc.body)
			}
			if got := parseErr == nil; got != tc.ok && tc.gap == "" {
				t.Fatalf("send.ParseRequest accepts=%v, want %v: %v", got, tc.ok, parseErr)
			}
			if tc.gap == "" {
				if (schemaErr == nil) != (parseErr == nil) {
					t.Fatalf("schema accepts, parser rejects (%v): not a documented gap", parseErr)
				}
				return
			}
			// A documented gap: the case must really fall into it, or the
			// table (or the document) is out of date.
			if schemaErr != nil || parseErr == nil {
				t.Fatalf("want the schema to accept and the parser to reject (%q); schema: %v, parser: %v", tc.gap, schemaErr, parseErr)
			}
			if !gaps[tc.gap] {
				t.Fatalf("the parser rejects it for %v, want %q: %v", gaps, tc.gap, parseErr)
			}
		})
	}
}

// Every gap has a case that shows it, and every case that shows one is
// listed as such.
func TestEveryGapHasACase(t *testing.T) {
	seen := map[gap]bool{}
	for _, tc := range agreementCases {
		seen[tc.gap] = true
	}
	for _, g := range allGaps {
		if !seen[g] {
			t.Errorf("no agreement case shows the gap %q", g)
		}
	}
}

// FuzzSendRequestAgreement feeds arbitrary bodies to both. The seed corpus
// is the agreement table.
func FuzzSendRequestAgreement(f *testing.F) {
	for _, tc := range agreementCases {
		f.Add([]byte(tc.body))
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<20 {
			return
		}
		if schemaErr, parseErr, _, problem := v.verdict(body); problem != "" {
			t.Fatalf("%s\n schema: %v\n parser: %v\n body: %q", problem, schemaErr, parseErr, body)
		}
	})
}

// FuzzSendRequestFields builds well-formed bodies from fuzzed member values,
// which reaches the field rules far more often than raw bytes do.
func FuzzSendRequestFields(f *testing.F) {
	f.Add("sms", "+15550100000", "", "", "Hello", "", "https://x.example/a", "a.pdf", "application/pdf", "g1", uint8(1))
	f.Add("email", "", "Ann@Example.com", "", "Hi", "Subject", "HTTPS://[::1]/x", ".x", "text/plain; charset=utf-8", "", uint8(0))
	f.Add("imessage", "", "", "lead_x", "\u3000", "", "https://:1/", "..", "png", "\t", uint8(11))
	f.Add("sms", "call me", "x", "lead\u200b", strings.Repeat("é", 1601), "a\nb", "https://u@x/", "a/b", "image/png; x", strings.Repeat("9", 256), uint8(10))
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, channel, phone, mail, leadID, text, subject, url, filename, contentType, crm string, n uint8) {
		m := map[string]any{"channel": channel, "recipientPhone": phone, "recipientEmail": mail, "leadId": leadID,
			"body": text, "subject": subject, "ghlContactId": crm}
		if n > 0 {
			a := map[string]any{"url": url, "filename": filename, "contentType": contentType}
			items := make([]any, int(n)%13)
			for i := range items {
				items[i] = a
			}
			m["attachments"] = items
		}
		body, err := json.Marshal(m)
		if err != nil {
			t.Skip()
		}
		if schemaErr, parseErr, _, problem := v.verdict(body); problem != "" {
			t.Fatalf("%s\n schema: %v\n parser: %v\n body: %s", problem, schemaErr, parseErr, body)
		}
	})
}
