package send

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/messages"
)

// reqDoc returns the JSON of a valid sms request changed by kv: pairs of a key
// and its raw JSON value. An empty value removes the key.
func reqDoc(kv ...string) []byte {
	keys := []string{"channel", "recipientPhone", "body"}
	vals := map[string]string{"channel": `"sms"`, "recipientPhone": `"+15550100000"`, "body": `"Hello"`}
	for i := 0; i+1 < len(kv); i += 2 {
		if _, ok := vals[kv[i]]; !ok {
			keys = append(keys, kv[i])
		}
		vals[kv[i]] = kv[i+1]
	}
	var parts []string
	for _, k := range keys {
		if vals[k] != "" {
			parts = append(parts, fmt.Sprintf("%q:%s", k, vals[k]))
		}
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// reqEmailDoc is reqDoc for a valid email request.
func reqEmailDoc(kv ...string) []byte {
	return reqDoc(append([]string{"channel", `"email"`, "recipientPhone", "", "recipientEmail", `"ada@example.com"`}, kv...)...)
}

// reqQuote returns s as a JSON string.
func reqQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

type reqCase struct {
	name     string
	body     []byte
	noRegion bool     // parse without a default region (else "US")
	fields   []string // the field errors wanted, in order; nil means success
	want     any      // on success, the part of the result the table checks
}

// reqRun runs a table: a case succeeds with get(result) == want, or fails
// with exactly the wanted fields.
func reqRun(t *testing.T, cases []reqCase, get func(Request) any) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			region := "US"
			if tt.noRegion {
				region = ""
			}
			got, err := ParseRequest(tt.body, region)
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("ParseRequest(%s) = %v, fields %v; want success", tt.body, err, reqFields(err))
				}
				if diff := cmp.Diff(tt.want, get(got)); diff != "" {
					t.Errorf("ParseRequest(%s) mismatch (-want +got):\n%s", tt.body, diff)
				}
				return
			}
			if diff := cmp.Diff(tt.fields, reqFieldNames(t, err)); diff != "" {
				t.Errorf("ParseRequest(%s) fields (-want +got):\n%s", tt.body, diff)
			}
			if err != nil && got.Channel != "" {
				t.Errorf("got %+v with an error, want the zero Request", got)
			}
		})
	}
}

// reqFields returns the field errors of a validation error, or nil.
func reqFields(err error) []msgapi.FieldError {
	var e *msgapi.Error
	if errors.As(err, &e) {
		return e.Fields
	}
	return nil
}

// reqFieldNames checks that err is a validation error whose field errors all
// have a message, and returns their field names.
func reqFieldNames(t *testing.T, err error) []string {
	t.Helper()
	var e *msgapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *msgapi.Error", err, err)
	}
	if e.Code != msgapi.CodeInvalid {
		t.Fatalf("code = %q, want %q", e.Code, msgapi.CodeInvalid)
	}
	if e.Message == "" {
		t.Error("error has no message")
	}
	names := []string{}
	for _, f := range e.Fields {
		if f.Message == "" {
			t.Errorf("field error %q has no message", f.Field)
		}
		names = append(names, f.Field)
	}
	return names
}

func TestParseRequestChannel(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "sms", body: reqDoc(), want: messages.ChannelSMS},
		{name: "imessage", body: reqDoc("channel", `"imessage"`), want: messages.ChannelIMessage},
		{name: "email", body: reqEmailDoc(), want: messages.ChannelEmail},
		{name: "missing", body: reqDoc("channel", ""), fields: []string{"channel"}},
		{name: "empty", body: reqDoc("channel", `""`), fields: []string{"channel"}},
		{name: "null", body: reqDoc("channel", `null`), fields: []string{"channel"}},
		{name: "upper case", body: reqDoc("channel", `"SMS"`), fields: []string{"channel"}},
		{name: "unknown", body: reqDoc("channel", `"whatsapp"`), fields: []string{"channel"}},
		{name: "number", body: reqDoc("channel", `1`), fields: []string{"channel"}},
		{name: "array", body: reqDoc("channel", `["sms"]`), fields: []string{"channel"}},
		// Without a channel, no recipient is required, so only channel is reported.
		{name: "missing with no recipient", body: reqDoc("channel", "", "recipientPhone", ""), fields: []string{"channel"}},
	}, func(r Request) any { return r.Channel })
}

func TestParseRequestChannelMessage(t *testing.T) {
	_, err := ParseRequest(reqDoc("channel", ""), "US")
	want := []msgapi.FieldError{{Field: "channel", Message: `is required: one of "sms", "imessage", "email"`}}
	if diff := cmp.Diff(want, reqFields(err)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestParseRequestRecipientPhone(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "formatted", body: reqDoc("recipientPhone", `"+1 (555) 010-0000"`), want: "+15550100000"},
		{name: "national uses region", body: reqDoc("recipientPhone", `"555-010-0000"`), want: "+15550100000"},
		{name: "E.164", body: reqDoc("recipientPhone", `"+15550100000"`), want: "+15550100000"},
		{name: "E.164 without region", body: reqDoc("recipientPhone", `"+442079460000"`), noRegion: true, want: "+442079460000"},
		{name: "blank is absent", body: reqEmailDoc("recipientPhone", `"  "`), want: ""},
		{name: "null is absent", body: reqEmailDoc("recipientPhone", `null`), want: ""},
		{name: "kept on email channel", body: reqEmailDoc("recipientPhone", `"555 010 0000"`), want: "+15550100000"},
		{name: "national without region", body: reqDoc("recipientPhone", `"555-010-0000"`), noRegion: true, fields: []string{"recipientPhone"}},
		{name: "letters", body: reqDoc("recipientPhone", `"call me"`), fields: []string{"recipientPhone"}},
		{name: "too short", body: reqDoc("recipientPhone", `"+1 555"`), fields: []string{"recipientPhone"}},
		{name: "number", body: reqDoc("recipientPhone", `15550100000`), fields: []string{"recipientPhone"}},
		{name: "missing for sms", body: reqDoc("recipientPhone", ""), fields: []string{"recipientPhone"}},
		{name: "blank for sms", body: reqDoc("recipientPhone", `" "`), fields: []string{"recipientPhone"}},
		{name: "invalid on email channel", body: reqEmailDoc("recipientPhone", `"12"`), fields: []string{"recipientPhone"}},
		{name: "invalid with leadId", body: reqDoc("recipientPhone", `"abc"`, "leadId", `"lead_1"`), fields: []string{"recipientPhone"}},
	}, func(r Request) any { return r.RecipientPhone })
}

func TestParseRequestRecipientEmail(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "lower-cased", body: reqEmailDoc("recipientEmail", `" Ada@Example.COM "`), want: "ada@example.com"},
		{name: "kept on sms channel", body: reqDoc("recipientEmail", `"ADA@example.com"`), want: "ada@example.com"},
		{name: "empty is absent", body: reqDoc("recipientEmail", `""`), want: ""},
		{name: "missing for email", body: reqEmailDoc("recipientEmail", ""), fields: []string{"recipientEmail"}},
		{name: "null for email", body: reqEmailDoc("recipientEmail", `null`), fields: []string{"recipientEmail"}},
		{name: "missing for email with phone", body: reqEmailDoc("recipientEmail", "", "recipientPhone", `"+15550100000"`), fields: []string{"recipientEmail"}},
		{name: "display name", body: reqEmailDoc("recipientEmail", `"Ada <ada@example.com>"`), fields: []string{"recipientEmail"}},
		{name: "no domain dot", body: reqEmailDoc("recipientEmail", `"ada@localhost"`), fields: []string{"recipientEmail"}},
		{name: "header injection", body: reqEmailDoc("recipientEmail", `"ada@example.com\r\nBcc: eve@example.com"`), fields: []string{"recipientEmail"}},
		{name: "invalid on sms channel", body: reqDoc("recipientEmail", `"nope"`), fields: []string{"recipientEmail"}},
		{name: "boolean", body: reqEmailDoc("recipientEmail", `true`), fields: []string{"recipientEmail"}},
		{name: "invalid with leadId", body: reqEmailDoc("recipientEmail", `"nope"`, "leadId", `"lead_1"`), fields: []string{"recipientEmail"}},
	}, func(r Request) any { return r.RecipientEmail })
}

func TestParseRequestRecipientRequired(t *testing.T) {
	phone, email, lead := `"+15550100000"`, `"ada@example.com"`, `"lead_1"`
	doc := func(channel, phone, email, lead string) []byte {
		return reqDoc("channel", reqQuote(channel), "recipientPhone", phone, "recipientEmail", email, "leadId", lead)
	}
	type addr struct{ Phone, Email string }
	reqRun(t, []reqCase{
		{name: "sms with phone", body: doc("sms", phone, "", ""), want: addr{"+15550100000", ""}},
		{name: "sms without phone", body: doc("sms", "", email, ""), fields: []string{"recipientPhone"}},
		{name: "sms without phone, with lead", body: doc("sms", "", "", lead), want: addr{}},
		{name: "sms with invalid email, no phone", body: doc("sms", "", `"x"`, ""), fields: []string{"recipientPhone", "recipientEmail"}},
		{name: "email with email", body: doc("email", "", email, ""), want: addr{"", "ada@example.com"}},
		{name: "email without email", body: doc("email", phone, "", ""), fields: []string{"recipientEmail"}},
		{name: "email without email, with lead", body: doc("email", "", "", lead), want: addr{}},
		{name: "imessage with phone", body: doc("imessage", phone, "", ""), want: addr{"+15550100000", ""}},
		{name: "imessage with email", body: doc("imessage", "", email, ""), want: addr{"", "ada@example.com"}},
		{name: "imessage with both goes to phone", body: doc("imessage", phone, email, ""), want: addr{"+15550100000", ""}},
		{name: "imessage with neither", body: doc("imessage", "", "", ""), fields: []string{"recipientPhone"}},
		{name: "imessage with neither, with lead", body: doc("imessage", "", "", lead), want: addr{}},
		{name: "imessage with invalid email only", body: doc("imessage", "", `"x"`, ""), fields: []string{"recipientEmail"}},
		// A bad leadId is the error to fix; the lead would supply the phone.
		{name: "sms with invalid leadId", body: doc("sms", "", "", `"a\nb"`), fields: []string{"leadId"}},
	}, func(r Request) any {
		p, e := r.DeliveryAddress()
		return addr{p, e}
	})
}

func TestParseRequestLeadID(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "given", body: reqDoc("leadId", `"lead_123"`), want: "lead_123"},
		{name: "128 bytes", body: reqDoc("leadId", reqQuote(strings.Repeat("a", 128))), want: strings.Repeat("a", 128)},
		{name: "empty is absent", body: reqDoc("leadId", `""`), want: ""},
		{name: "null is absent", body: reqDoc("leadId", `null`), want: ""},
		{name: "129 bytes", body: reqDoc("leadId", reqQuote(strings.Repeat("a", 129))), fields: []string{"leadId"}},
		{name: "newline", body: reqDoc("leadId", `"a\nb"`), fields: []string{"leadId"}},
		{name: "NUL", body: reqDoc("leadId", `"a\u0000b"`), fields: []string{"leadId"}},
		{name: "number", body: reqDoc("leadId", `123`), fields: []string{"leadId"}},
	}, func(r Request) any { return r.LeadID })
}

func TestParseRequestBody(t *testing.T) {
	runes := func(s string, n int) string { return strings.Repeat(s, n) }
	reqRun(t, []reqCase{
		{name: "plain", body: reqDoc("body", `"Hello"`), want: "Hello"},
		{name: "space kept", body: reqDoc("body", `"  Hello \n"`), want: "  Hello \n"},
		{name: "not Unicode-normalised", body: reqDoc("body", `"Cafe\u0301 Ｈｉ"`), want: "Cafe\u0301 Ｈｉ"},
		{name: "escapes decoded", body: reqDoc("body", `"tab\there \"q\" \ud83d\ude00"`), want: "tab\there \"q\" 😀"},
		{name: "escaped backslash before u", body: reqDoc("body", `"\\ud800"`), want: `\ud800`},
		{name: "sms 1600 characters", body: reqDoc("body", reqQuote(runes("é", 1600))), want: runes("é", 1600)},
		{name: "sms 1600 emoji", body: reqDoc("body", reqQuote(runes("😀", 1600))), want: runes("😀", 1600)},
		{name: "email 64 KiB", body: reqEmailDoc("body", reqQuote(runes("a", 64<<10))), want: runes("a", 64<<10)},
		{name: "imessage 64 KiB", body: reqDoc("channel", `"imessage"`, "body", reqQuote(runes("a", 64<<10))), want: runes("a", 64<<10)},
		{name: "missing", body: reqDoc("body", ""), fields: []string{"body"}},
		{name: "null", body: reqDoc("body", `null`), fields: []string{"body"}},
		{name: "empty", body: reqDoc("body", `""`), fields: []string{"body"}},
		{name: "whitespace only", body: reqDoc("body", `" \n\t\u00a0\u3000"`), fields: []string{"body"}},
		{name: "number", body: reqDoc("body", `5`), fields: []string{"body"}},
		{name: "object", body: reqDoc("body", `{"text":"hi"}`), fields: []string{"body"}},
		{name: "sms 1601 characters", body: reqDoc("body", reqQuote(runes("é", 1601))), fields: []string{"body"}},
		{name: "email over 64 KiB", body: reqEmailDoc("body", reqQuote(runes("a", 64<<10+1))), fields: []string{"body"}},
		{name: "imessage over 64 KiB", body: reqDoc("channel", `"imessage"`, "body", reqQuote(runes("a", 64<<10+1))), fields: []string{"body"}},
		{name: "unknown channel over 64 KiB", body: reqDoc("channel", `"fax"`, "body", reqQuote(runes("a", 64<<10+1))), fields: []string{"channel", "body"}},
	}, func(r Request) any { return r.Body })
}

func TestParseRequestSubject(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "email", body: reqEmailDoc("subject", `"Your order"`), want: "Your order"},
		{name: "email without", body: reqEmailDoc(), want: ""},
		{name: "tab allowed", body: reqEmailDoc("subject", `"a\tb"`), want: "a\tb"},
		{name: "998 bytes", body: reqEmailDoc("subject", reqQuote(strings.Repeat("s", 998))), want: strings.Repeat("s", 998)},
		{name: "empty on sms is absent", body: reqDoc("subject", `""`), want: ""},
		{name: "null on sms is absent", body: reqDoc("subject", `null`), want: ""},
		{name: "on sms", body: reqDoc("subject", `"Hi"`), fields: []string{"subject"}},
		{name: "on imessage", body: reqDoc("channel", `"imessage"`, "subject", `"Hi"`), fields: []string{"subject"}},
		{name: "999 bytes", body: reqEmailDoc("subject", reqQuote(strings.Repeat("s", 999))), fields: []string{"subject"}},
		{name: "CRLF header injection", body: reqEmailDoc("subject", `"Hi\r\nBcc: eve@example.com"`), fields: []string{"subject"}},
		{name: "LF", body: reqEmailDoc("subject", `"Hi\nthere"`), fields: []string{"subject"}},
		{name: "CR", body: reqEmailDoc("subject", `"Hi\rthere"`), fields: []string{"subject"}},
		{name: "NUL", body: reqEmailDoc("subject", `"Hi\u0000"`), fields: []string{"subject"}},
		{name: "number", body: reqEmailDoc("subject", `1`), fields: []string{"subject"}},
	}, func(r Request) any { return r.Subject })
}

func TestParseRequestAttachments(t *testing.T) {
	att := func(url string) string { return fmt.Sprintf(`{"url":%s}`, reqQuote(url)) }
	list := func(items ...string) string { return "[" + strings.Join(items, ",") + "]" }
	ten := make([]string, 10)
	tenWant := make([]messages.Attachment, 10)
	for i := range ten {
		ten[i] = att(fmt.Sprintf("https://cdn.example.com/%d.png", i))
		tenWant[i] = messages.Attachment{URL: fmt.Sprintf("https://cdn.example.com/%d.png", i)}
	}
	reqRun(t, []reqCase{
		{name: "absent", body: reqDoc(), want: []messages.Attachment(nil)},
		{name: "null", body: reqDoc("attachments", `null`), want: []messages.Attachment(nil)},
		{name: "empty", body: reqDoc("attachments", `[]`), want: []messages.Attachment(nil)},
		{
			name: "full",
			body: reqDoc("attachments", `[{"url":"https://cdn.example.com/a.pdf?sig=1","filename":"Quote 2024.pdf","contentType":"application/pdf","extra":1}]`),
			want: []messages.Attachment{{URL: "https://cdn.example.com/a.pdf?sig=1", Filename: "Quote 2024.pdf", ContentType: "application/pdf"}},
		},
		{
			name: "optional fields null or empty",
			body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":null,"contentType":""}]`),
			want: []messages.Attachment{{URL: "https://a.example/x"}},
		},
		{
			name: "content type with parameters",
			body: reqDoc("attachments", `[{"url":"https://a.example/x","contentType":"text/plain; charset=utf-8"}]`),
			want: []messages.Attachment{{URL: "https://a.example/x", ContentType: "text/plain; charset=utf-8"}},
		},
		{name: "scheme case kept", body: reqDoc("attachments", list(att("HTTPS://a.example/x"))), want: []messages.Attachment{{URL: "HTTPS://a.example/x"}}},
		{name: "ten", body: reqDoc("attachments", list(ten...)), want: tenWant},
		{name: "eleven", body: reqDoc("attachments", list(append(ten, att("http://bad"))...)), fields: []string{"attachments"}},
		{name: "object", body: reqDoc("attachments", att("https://a.example/x")), fields: []string{"attachments"}},
		{name: "string", body: reqDoc("attachments", `"https://a.example/x"`), fields: []string{"attachments"}},
		{name: "item not object", body: reqDoc("attachments", `["https://a.example/x"]`), fields: []string{"attachments[0]"}},
		{name: "url missing", body: reqDoc("attachments", `[{"filename":"a.pdf"}]`), fields: []string{"attachments[0].url"}},
		{name: "url null", body: reqDoc("attachments", `[{"url":null}]`), fields: []string{"attachments[0].url"}},
		{name: "url empty", body: reqDoc("attachments", list(att(""))), fields: []string{"attachments[0].url"}},
		{name: "url number", body: reqDoc("attachments", `[{"url":1}]`), fields: []string{"attachments[0].url"}},
		{name: "url http", body: reqDoc("attachments", list(att("http://a.example/x"))), fields: []string{"attachments[0].url"}},
		{name: "url ftp", body: reqDoc("attachments", list(att("ftp://a.example/x"))), fields: []string{"attachments[0].url"}},
		{name: "url relative", body: reqDoc("attachments", list(att("/x.png"))), fields: []string{"attachments[0].url"}},
		{name: "url without host", body: reqDoc("attachments", list(att("https:///x.png"))), fields: []string{"attachments[0].url"}},
		{name: "url with port only", body: reqDoc("attachments", list(att("https://:443/x.png"))), fields: []string{"attachments[0].url"}},
		{name: "url opaque", body: reqDoc("attachments", list(att("https:x.png"))), fields: []string{"attachments[0].url"}},
		{name: "url with credentials", body: reqDoc("attachments", list(att("https://u:p@a.example/x"))), fields: []string{"attachments[0].url"}},
		{name: "url with space", body: reqDoc("attachments", list(att("https://a.example/a b.png"))), fields: []string{"attachments[0].url"}},
		{name: "url too long", body: reqDoc("attachments", list(att("https://a.example/"+strings.Repeat("x", 2048)))), fields: []string{"attachments[0].url"}},
		{name: "url twice", body: reqDoc("attachments", `[{"url":"https://a.example/x","url":"https://b.example/y"}]`), fields: []string{"attachments[0].url"}},
		{name: "filename 255 bytes", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":`+reqQuote(strings.Repeat("f", 255))+`}]`), want: []messages.Attachment{{URL: "https://a.example/x", Filename: strings.Repeat("f", 255)}}},
		{name: "filename 256 bytes", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":`+reqQuote(strings.Repeat("f", 256))+`}]`), fields: []string{"attachments[0].filename"}},
		{name: "filename with slash", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":"../etc/passwd"}]`), fields: []string{"attachments[0].filename"}},
		{name: "filename with backslash", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":"a\\b.txt"}]`), fields: []string{"attachments[0].filename"}},
		{name: "filename dot dot", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":".."}]`), fields: []string{"attachments[0].filename"}},
		{name: "filename control", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":"a\r\n.txt"}]`), fields: []string{"attachments[0].filename"}},
		{name: "filename number", body: reqDoc("attachments", `[{"url":"https://a.example/x","filename":7}]`), fields: []string{"attachments[0].filename"}},
		{name: "content type without subtype", body: reqDoc("attachments", `[{"url":"https://a.example/x","contentType":"image"}]`), fields: []string{"attachments[0].contentType"}},
		{name: "content type malformed", body: reqDoc("attachments", `[{"url":"https://a.example/x","contentType":"image/png; ="}]`), fields: []string{"attachments[0].contentType"}},
		{name: "content type with CRLF", body: reqDoc("attachments", `[{"url":"https://a.example/x","contentType":"image/png\r\nX: y"}]`), fields: []string{"attachments[0].contentType"}},
		{
			name:   "errors in several items",
			body:   reqDoc("attachments", `[{"url":"http://a.example/x"},{"url":"https://a.example/y"},{"url":"https://a.example/z","filename":"a/b","contentType":"nope"}]`),
			fields: []string{"attachments[0].url", "attachments[2].filename", "attachments[2].contentType"},
		},
	}, func(r Request) any { return r.Attachments })
}

func TestParseRequestCRM(t *testing.T) {
	long := reqQuote(strings.Repeat("c", 256))
	reqRun(t, []reqCase{
		{name: "absent", body: reqDoc(), want: messages.CRMRefs{}},
		{
			name: "all four",
			body: reqDoc("ghlContactId", `"g1"`, "ghlLocationId", `"loc"`, "hsContactId", `"h1"`, "hsPortalId", `"42"`),
			want: messages.CRMRefs{GHLContactID: "g1", GHLLocationID: "loc", HSContactID: "h1", HSPortalID: "42"},
		},
		{name: "null", body: reqDoc("ghlContactId", `null`), want: messages.CRMRefs{}},
		{name: "255 bytes", body: reqDoc("hsContactId", reqQuote(strings.Repeat("c", 255))), want: messages.CRMRefs{HSContactID: strings.Repeat("c", 255)}},
		{name: "256 bytes", body: reqDoc("ghlContactId", long), fields: []string{"ghlContactId"}},
		// HubSpot sends its contact and portal ids as JSON numbers.
		{name: "HubSpot numbers", body: reqDoc("hsPortalId", `4411`, "hsContactId", `9007199254740991`), want: messages.CRMRefs{HSPortalID: "4411", HSContactID: "9007199254740991"}},
		{name: "HubSpot number zero and exponent", body: reqDoc("hsPortalId", `-0`, "hsContactId", `4.2e1`), want: messages.CRMRefs{HSPortalID: "0", HSContactID: "42"}},
		{name: "HubSpot number with a fraction", body: reqDoc("hsPortalId", `1.5`), fields: []string{"hsPortalId"}},
		{name: "HubSpot number negative", body: reqDoc("hsContactId", `-1`), fields: []string{"hsContactId"}},
		{name: "HubSpot number past 2^53-1", body: reqDoc("hsContactId", `9007199254740993`), fields: []string{"hsContactId"}},
		{name: "HubSpot number beyond float64", body: reqDoc("hsPortalId", `1e400`), fields: []string{"hsPortalId"}},
		{name: "GoHighLevel number", body: reqDoc("ghlContactId", `42`), fields: []string{"ghlContactId"}},
		{name: "control character", body: reqDoc("ghlLocationId", `"a\nb"`), fields: []string{"ghlLocationId"}},
		{
			name:   "all four bad, in order",
			body:   reqDoc("hsPortalId", `1.5`, "hsContactId", long, "ghlLocationId", `[]`, "ghlContactId", `{}`),
			fields: []string{"ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId"},
		},
	}, func(r Request) any { return r.CRM })
}

func TestParseRequestMetadata(t *testing.T) {
	// nest returns n objects nested in one another around 1.
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	// sized returns a metadata object whose compact form is n bytes, and a
	// pretty-printed copy that is larger.
	sized := func(n int) (compact, pretty string) {
		pad := strings.Repeat("x", n-len(`{"k":""}`))
		return `{"k":"` + pad + `"}`, "{\n    \"k\" :   \"" + pad + "\"\n}"
	}
	atLimit, atLimitPretty := sized(16 << 10)
	_, overLimitPretty := sized(16<<10 + 1)
	reqRun(t, []reqCase{
		{name: "absent", body: reqDoc(), want: map[string]any(nil)},
		{name: "null", body: reqDoc("metadata", `null`), want: map[string]any(nil)},
		{name: "empty", body: reqDoc("metadata", `{}`), want: map[string]any{}},
		{
			name: "numbers round-trip exactly",
			body: reqDoc("metadata", `{"n":1,"f":1.10,"big":12345678901234567890123,"e":-2.5e-3}`),
			want: map[string]any{"n": json.Number("1"), "f": json.Number("1.10"), "big": json.Number("12345678901234567890123"), "e": json.Number("-2.5e-3")},
		},
		{
			name: "nested",
			body: reqDoc("metadata", `{"crm":{"ids":[1,"two",{"x":null}],"ok":true},"":"empty key"}`),
			want: map[string]any{
				"crm": map[string]any{"ids": []any{json.Number("1"), "two", map[string]any{"x": nil}}, "ok": true},
				"":    "empty key",
			},
		},
		{name: "NUL in a value", body: reqDoc("metadata", `{"a":"x\u0000y"}`), want: map[string]any{"a": "x\x00y"}},
		{name: "16 KiB compact", body: reqDoc("metadata", atLimit), want: map[string]any{"k": strings.Repeat("x", 16<<10-len(`{"k":""}`))}},
		{name: "16 KiB compact, larger pretty", body: reqDoc("metadata", atLimitPretty), want: map[string]any{"k": strings.Repeat("x", 16<<10-len(`{"k":""}`))}},
		{name: "20 levels", body: reqDoc("metadata", nest(20)), want: func() any {
			var m map[string]any
			d := json.NewDecoder(strings.NewReader(nest(20)))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}()},
		{name: "over 16 KiB compact", body: reqDoc("metadata", overLimitPretty), fields: []string{"metadata"}},
		{name: "array", body: reqDoc("metadata", `[1]`), fields: []string{"metadata"}},
		{name: "string", body: reqDoc("metadata", `"{}"`), fields: []string{"metadata"}},
		{name: "number", body: reqDoc("metadata", `5`), fields: []string{"metadata"}},
		{name: "dollar key", body: reqDoc("metadata", `{"$set":1}`), fields: []string{"metadata"}},
		{name: "nested dollar key", body: reqDoc("metadata", `{"a":[{"$where":"x"}]}`), fields: []string{"metadata"}},
		{name: "dotted key", body: reqDoc("metadata", `{"a.b":1}`), fields: []string{"metadata"}},
		{name: "NUL in a key", body: reqDoc("metadata", `{"a\u0000":1}`), fields: []string{"metadata"}},
		{name: "duplicate key", body: reqDoc("metadata", `{"a":1,"a":2}`), fields: []string{"metadata"}},
		{name: "nested duplicate key", body: reqDoc("metadata", `{"a":{"b":1,"b":1}}`), fields: []string{"metadata"}},
		{name: "nested arrays", body: reqDoc("metadata", `{"a":[[1]]}`), fields: []string{"metadata"}},
		{name: "number beyond float64", body: reqDoc("metadata", `{"a":1e400}`), fields: []string{"metadata"}},
		{name: "too deep", body: reqDoc("metadata", nest(40)), fields: []string{"metadata"}},
		{name: "invalid UTF-8", body: reqDoc("metadata", "{\"a\":\"\xff\"}"), fields: []string{"metadata"}},
		{name: "unpaired surrogate", body: reqDoc("metadata", `{"a":"\ud800"}`), fields: []string{"metadata"}},
	}, func(r Request) any { return r.Metadata })
}

func TestParseRequestMetadataMessage(t *testing.T) {
	_, err := ParseRequest(reqDoc("metadata", `{"order":{"items":[{"sku.id":1}]}}`), "US")
	want := []msgapi.FieldError{{Field: "metadata", Message: `keys must not start with "$" or contain "." or NUL (at metadata.order.items[0].sku.id)`}}
	if diff := cmp.Diff(want, reqFields(err)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestParseRequestJSONTypes(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "unknown fields ignored", body: reqDoc("foo", `[1,{"b":2}]`, "Body", `5`, "CHANNEL", `null`), want: "Hello"},
		{
			name: "optional fields null",
			body: reqDoc("recipientEmail", "null", "leadId", "null", "subject", "null", "attachments", "null",
				"ghlContactId", "null", "ghlLocationId", "null", "hsContactId", "null", "hsPortalId", "null", "metadata", "null"),
			want: "Hello",
		},
		// Keys match exactly; encoding/json would have taken "Channel" as channel.
		{name: "key case matters", body: reqDoc("channel", "", "Channel", `"sms"`), fields: []string{"channel"}},
		{name: "escaped key is the same key", body: []byte(`{"ch\u0061nnel":"sms","recipientPhone":"+15550100000","b\u006fdy":"x"}`), want: "x"},
		{
			name: "every field the wrong type",
			body: []byte(`{"channel":1,"recipientPhone":2,"recipientEmail":[],"leadId":{},"body":true,"subject":3,` +
				`"attachments":{},"ghlContactId":4,"ghlLocationId":5,"hsContactId":true,"hsPortalId":[7],"metadata":"m"}`),
			fields: []string{"channel", "recipientPhone", "recipientEmail", "leadId", "body", "subject", "attachments",
				"ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId", "metadata"},
		},
	}, func(r Request) any { return r.Body })
}

func TestParseRequestUTF8(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "surrogate pair", body: reqDoc("body", `"\ud83d\ude00"`), want: "😀"},
		{name: "literal replacement character", body: reqDoc("body", `"\ufffd �"`), want: "\ufffd \ufffd"},
		{name: "invalid UTF-8 in body", body: reqDoc("body", "\"a\xffb\""), fields: []string{"body"}},
		{name: "overlong encoding", body: reqDoc("body", "\"\xc0\xaf\""), fields: []string{"body"}},
		{name: "lone high surrogate", body: reqDoc("body", `"\ud83d"`), fields: []string{"body"}},
		{name: "lone high surrogate at end", body: reqDoc("body", `"a\ud83d"`), fields: []string{"body"}},
		{name: "lone low surrogate", body: reqDoc("body", `"\ude00"`), fields: []string{"body"}},
		{name: "high surrogate then letter", body: reqDoc("body", `"\ud83d\u0041"`), fields: []string{"body"}},
		{name: "two high surrogates", body: reqDoc("body", `"\ud83d\ud83d"`), fields: []string{"body"}},
		{name: "invalid UTF-8 in subject", body: reqEmailDoc("subject", "\"\xfe\""), fields: []string{"subject"}},
		{name: "invalid UTF-8 in leadId", body: reqDoc("leadId", "\"\xfe\""), fields: []string{"leadId"}},
		{name: "invalid UTF-8 in phone", body: reqDoc("recipientPhone", "\"+1555\xff0100000\""), fields: []string{"recipientPhone"}},
		{name: "invalid UTF-8 in url", body: reqDoc("attachments", "[{\"url\":\"https://a.example/\xff\"}]"), fields: []string{"attachments[0].url"}},
		{name: "invalid UTF-8 in unknown key ignored", body: []byte("{\"channel\":\"sms\",\"recipientPhone\":\"+15550100000\",\"body\":\"x\",\"\xff\":1}"), want: "x"},
	}, func(r Request) any { return r.Body })
}

func TestParseRequestDuplicateKeys(t *testing.T) {
	reqRun(t, []reqCase{
		{name: "channel twice", body: []byte(`{"channel":"sms","channel":"email","recipientPhone":"+15550100000","body":"x"}`), fields: []string{"channel"}},
		{name: "body twice", body: []byte(`{"channel":"sms","recipientPhone":"+15550100000","body":"x","body":"y"}`), fields: []string{"body"}},
		{name: "body twice, once null", body: []byte(`{"channel":"sms","recipientPhone":"+15550100000","body":"x","body":null}`), fields: []string{"body"}},
		{name: "attachments twice", body: []byte(`{"channel":"sms","recipientPhone":"+15550100000","body":"x","attachments":[],"attachments":[]}`), fields: []string{"attachments"}},
		{name: "unknown key twice ignored", body: []byte(`{"channel":"sms","recipientPhone":"+15550100000","body":"x","foo":1,"foo":2}`), want: "x"},
	}, func(r Request) any { return r.Body })
}

func TestParseRequestAllErrorsAtOnce(t *testing.T) {
	body := []byte(`{
		"metadata": [],
		"hsPortalId": -7,
		"attachments": [{"url": "http://cdn.example.com/a.png", "filename": "a/b"}, {"contentType": "x"}],
		"subject": "Hi\r\nBcc: eve@example.com",
		"body": 5,
		"leadId": "a\u0001",
		"recipientEmail": "not-an-email",
		"recipientPhone": "call me",
		"channel": "fax"
	}`)
	_, err := ParseRequest(body, "US")
	want := []string{
		"channel", "recipientPhone", "recipientEmail", "leadId", "body", "subject",
		"attachments[0].url", "attachments[0].filename", "attachments[1].url", "attachments[1].contentType",
		"hsPortalId", "metadata",
	}
	if diff := cmp.Diff(want, reqFieldNames(t, err)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestParseRequestMalformed(t *testing.T) {
	for _, body := range []string{
		"",
		"  \n",
		"{",
		`{"channel":"sms",}`,
		`{"channel":"sms"} {}`,
		`{} x`,
		"\xef\xbb\xbf{}",
		"[]",
		`[{"channel":"sms"}]`,
		"null",
		`"hello"`,
		"42",
		"{\"body\":\"a\x00\"}", // raw control character in a string
	} {
		t.Run(body, func(t *testing.T) {
			_, err := ParseRequest([]byte(body), "US")
			var e *msgapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseRequest(%q) = %v, want *msgapi.Error", body, err)
			}
			if e.Code != msgapi.CodeInvalid || e.Message == "" || e.Fields != nil {
				t.Errorf("ParseRequest(%q) = code %q, message %q, fields %v; want %q, a message, no fields",
					body, e.Code, e.Message, e.Fields, msgapi.CodeInvalid)
			}
		})
	}
}

func TestParseRequestMalformedMessage(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"[]", "the request body must be a JSON object"},
		{"", "the request body is empty; send a JSON object"},
		{`{"a":}`, "the request body is not valid JSON: invalid character '}' looking for beginning of value (at byte 6)"},
	} {
		_, err := ParseRequest([]byte(tt.body), "US")
		var e *msgapi.Error
		if !errors.As(err, &e) || e.Message != tt.want {
			t.Errorf("ParseRequest(%q) = %v, want message %q", tt.body, err, tt.want)
		}
	}
}

func TestParseRequestTooLarge(t *testing.T) {
	body := reqEmailDoc("metadata", `{}`, "pad", reqQuote(strings.Repeat(" ", 1<<20)))
	_, err := ParseRequest(body, "US")
	if got := msgapi.ErrorCode(err); got != msgapi.CodeTooLarge {
		t.Errorf("ParseRequest(%d bytes) code = %q, want %q", len(body), got, msgapi.CodeTooLarge)
	}
}

func TestParseRequestWhole(t *testing.T) {
	body := []byte(`{
		"channel": "email",
		"recipientPhone": "(555) 010-0123",
		"recipientEmail": "Ada@Example.com",
		"leadId": "lead_9",
		"body": "Hi Ada,\n\nyour quote is attached.",
		"subject": "Your quote",
		"attachments": [{"url": "https://cdn.example.com/q.pdf", "filename": "q.pdf", "contentType": "application/pdf"}],
		"ghlContactId": "ghl_c", "ghlLocationId": "ghl_l", "hsContactId": "hs_c", "hsPortalId": "hs_p",
		"metadata": {"campaign": "spring", "step": 3}
	}`)
	got, err := ParseRequest(body, "US")
	if err != nil {
		t.Fatalf("ParseRequest: %v (%v)", err, reqFields(err))
	}
	want := Request{
		Channel:        messages.ChannelEmail,
		RecipientPhone: "+15550100123",
		RecipientEmail: "ada@example.com",
		LeadID:         "lead_9",
		Body:           "Hi Ada,\n\nyour quote is attached.",
		Subject:        "Your quote",
		Attachments:    []messages.Attachment{{URL: "https://cdn.example.com/q.pdf", Filename: "q.pdf", ContentType: "application/pdf"}},
		CRM:            messages.CRMRefs{GHLContactID: "ghl_c", GHLLocationID: "ghl_l", HSContactID: "hs_c", HSPortalID: "hs_p"},
		Metadata:       map[string]any{"campaign": "spring", "step": json.Number("3")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseRequest mismatch (-want +got):\n%s", diff)
	}
}

func TestFillFromLead(t *testing.T) {
	type recipients struct{ Phone, Email string }
	tests := []struct {
		name         string
		req          Request
		phone, email string // the lead's
		want         recipients
		field        string // the field error wanted, or ""
	}{
		{name: "sms from lead", req: Request{Channel: messages.ChannelSMS}, phone: "+15550100000", email: "a@example.com", want: recipients{"+15550100000", "a@example.com"}},
		{name: "request wins", req: Request{Channel: messages.ChannelSMS, RecipientPhone: "+15550100001"}, phone: "+15550100000", want: recipients{"+15550100001", ""}},
		{name: "sms, lead has only email", req: Request{Channel: messages.ChannelSMS}, email: "a@example.com", want: recipients{"", "a@example.com"}, field: "recipientPhone"},
		{name: "email from lead", req: Request{Channel: messages.ChannelEmail}, email: "a@example.com", want: recipients{"", "a@example.com"}},
		{name: "email, lead has only phone", req: Request{Channel: messages.ChannelEmail}, phone: "+15550100000", want: recipients{"+15550100000", ""}, field: "recipientEmail"},
		{name: "email given, phone from lead", req: Request{Channel: messages.ChannelEmail, RecipientEmail: "b@example.com"}, phone: "+15550100000", email: "a@example.com", want: recipients{"+15550100000", "b@example.com"}},
		{name: "imessage, lead has email", req: Request{Channel: messages.ChannelIMessage}, email: "a@example.com", want: recipients{"", "a@example.com"}},
		{name: "imessage, lead has nothing", req: Request{Channel: messages.ChannelIMessage}, field: "recipientPhone"},
		{name: "no channel", req: Request{}, phone: "+15550100000", want: recipients{"+15550100000", ""}, field: "channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req
			err := r.FillFromLead(tt.phone, tt.email)
			if diff := cmp.Diff(tt.want, recipients{r.RecipientPhone, r.RecipientEmail}); diff != "" {
				t.Errorf("recipients (-want +got):\n%s", diff)
			}
			if tt.field == "" {
				if err != nil {
					t.Fatalf("FillFromLead: %v", err)
				}
				p, e := r.DeliveryAddress()
				if (p == "") == (e == "") {
					t.Errorf("DeliveryAddress() = %q, %q; want exactly one", p, e)
				}
				return
			}
			if diff := cmp.Diff([]string{tt.field}, reqFieldNames(t, err)); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// A request that names a lead and no recipient passes parsing and is
// completed by the lead.
func TestFillFromLeadAfterParse(t *testing.T) {
	r, err := ParseRequest([]byte(`{"channel":"sms","leadId":"lead_1","body":"hi"}`), "US")
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	if p, e := r.DeliveryAddress(); p != "" || e != "" {
		t.Fatalf("DeliveryAddress() before fill = %q, %q; want none", p, e)
	}
	if err := r.FillFromLead("", "ada@example.com"); err == nil {
		t.Fatal("FillFromLead without a phone for sms: want an error")
	}
	r.RecipientEmail = ""
	if err := r.FillFromLead("+15550100000", ""); err != nil {
		t.Fatalf("FillFromLead: %v", err)
	}
	if p, e := r.DeliveryAddress(); p != "+15550100000" || e != "" {
		t.Errorf("DeliveryAddress() = %q, %q; want +15550100000", p, e)
	}
}

func TestDeliveryAddress(t *testing.T) {
	const phone, email = "+15550100000", "ada@example.com"
	tests := []struct {
		channel, phone, email string
		wantPhone, wantEmail  string
	}{
		{messages.ChannelSMS, phone, email, phone, ""},
		{messages.ChannelSMS, phone, "", phone, ""},
		{messages.ChannelEmail, phone, email, "", email},
		{messages.ChannelEmail, "", email, "", email},
		{messages.ChannelIMessage, phone, email, phone, ""},
		{messages.ChannelIMessage, phone, "", phone, ""},
		{messages.ChannelIMessage, "", email, "", email},
		{"fax", phone, email, "", ""},
	}
	for _, tt := range tests {
		r := Request{Channel: tt.channel, RecipientPhone: tt.phone, RecipientEmail: tt.email}
		p, e := r.DeliveryAddress()
		if p != tt.wantPhone || e != tt.wantEmail {
			t.Errorf("%+v.DeliveryAddress() = %q, %q; want %q, %q", r, p, e, tt.wantPhone, tt.wantEmail)
		}
	}
}

var reqE164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// reqEncode writes r back as a request body.
func reqEncode(t *testing.T, r Request) []byte {
	t.Helper()
	doc := map[string]any{"channel": r.Channel, "body": r.Body, "recipientPhone": r.RecipientPhone,
		"recipientEmail": r.RecipientEmail, "leadId": r.LeadID, "subject": r.Subject,
		"ghlContactId": r.CRM.GHLContactID, "ghlLocationId": r.CRM.GHLLocationID,
		"hsContactId": r.CRM.HSContactID, "hsPortalId": r.CRM.HSPortalID}
	if r.Attachments != nil {
		doc["attachments"] = r.Attachments
	}
	if r.Metadata != nil {
		doc["metadata"] = r.Metadata
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("encode %+v: %v", r, err)
	}
	return b
}

func FuzzParseRequest(f *testing.F) {
	for _, seed := range [][]byte{
		reqDoc(),
		reqEmailDoc("subject", `"Hi"`, "recipientPhone", `"555-010-0000"`),
		reqDoc("channel", `"imessage"`, "recipientPhone", "", "recipientEmail", `"A@B.co"`),
		reqDoc("recipientPhone", "", "leadId", `"lead_1"`),
		reqDoc("attachments", `[{"url":"https://a.example/x","filename":"a.pdf","contentType":"application/pdf"}]`),
		reqDoc("metadata", `{"a":[1,{"b":2.50}],"c":null}`),
		reqDoc("ghlContactId", `"g"`, "hsPortalId", `"1"`),
		reqDoc("body", `"\ud83d\ude00 "`),
		reqDoc("body", `"\ud83d"`),
		[]byte(`{"channel":1,"body":[],"metadata":"x","attachments":{}}`),
		[]byte(`{"channel":"sms","channel":"sms"}`),
		[]byte(`[]`),
		[]byte(``),
		[]byte("{\"body\":\"\xff\"}"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body, "US")
		if err != nil {
			var e *msgapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not *msgapi.Error", err, err)
			}
			if e.Code != msgapi.CodeInvalid && e.Code != msgapi.CodeTooLarge {
				t.Fatalf("code %q, want %q or %q", e.Code, msgapi.CodeInvalid, msgapi.CodeTooLarge)
			}
			for _, fe := range e.Fields {
				if fe.Field == "" || fe.Message == "" {
					t.Fatalf("empty field error %+v", fe)
				}
			}
			return
		}
		switch r.Channel {
		case messages.ChannelSMS, messages.ChannelIMessage, messages.ChannelEmail:
		default:
			t.Fatalf("success with channel %q", r.Channel)
		}
		if strings.TrimSpace(r.Body) == "" {
			t.Fatalf("success with blank body %q", r.Body)
		}
		if r.RecipientPhone != "" && !reqE164.MatchString(r.RecipientPhone) {
			t.Fatalf("recipientPhone %q is not E.164", r.RecipientPhone)
		}
		if r.RecipientEmail != strings.ToLower(r.RecipientEmail) {
			t.Fatalf("recipientEmail %q is not lower case", r.RecipientEmail)
		}
		if r.Subject != "" && r.Channel != messages.ChannelEmail {
			t.Fatalf("subject on channel %q", r.Channel)
		}
		if len(r.Attachments) > 10 {
			t.Fatalf("%d attachments", len(r.Attachments))
		}
		if r.LeadID == "" {
			p, e := r.DeliveryAddress()
			if (p == "") == (e == "") {
				t.Fatalf("without leadId, DeliveryAddress() = %q, %q; want exactly one", p, e)
			}
		}
		// A parsed request, written back, parses to itself: normalisation
		// is idempotent and nothing is lost.
		again, err := ParseRequest(reqEncode(t, r), "US")
		if err != nil {
			t.Fatalf("re-parse of %+v: %v (%v)", r, err, reqFields(err))
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("re-parse mismatch (-first +second):\n%s", diff)
		}
	})
}
