package send

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/messages"
)

// The field rules of a send request (SPEC: the request body table). The
// strict JSON reader (strictjson.go) splits the body into fields; metadata
// has rules of its own (metadata.go).

// Request is a validated POST /api/messages body. Recipients are
// normalised (contact.NormalizePhone, contact.NormalizeEmail); Body is
// exactly what the caller sent.
type Request struct {
	Channel        string // messages.ChannelSMS, messages.ChannelIMessage or messages.ChannelEmail
	RecipientPhone string // E.164 or ""
	RecipientEmail string // lower case or ""
	LeadID         string
	Body           string
	Subject        string
	Attachments    []messages.Attachment
	CRM            messages.CRMRefs
	Metadata       map[string]any // numbers are json.Number
	// SendAt, when set, asks for the message to go out then (a scheduled
	// send; CheckSendAt bounds it).
	SendAt time.Time
	// CancellationKey names the scheduled message for a cancel by key.
	CancellationKey string
	// IgnoreQuietHours sends a transactional text inside the workspace's
	// quiet hours (logged).
	IgnoreQuietHours bool
}

// Limits of a send request. The 1 MiB bound is also enforced, with a 413, by
// the HTTP layer before the body is read; it is repeated here so the parser
// is safe on its own.
const (
	reqMaxRequest       = 1 << 20
	reqMaxSMSBody       = 1600     // characters (runes)
	reqMaxBody          = 64 << 10 // bytes, every other channel
	reqMaxSubject       = 998      // RFC 5322 §2.1.1 line length
	reqMaxAttachments   = 10
	reqMaxURL           = 2048
	reqMaxFilename      = 255
	reqMaxContentType   = 255
	reqMaxCRMRef        = 255
	reqMaxLeadID        = 128
	reqMaxMetadata      = 16 << 10 // bytes of compact JSON
	reqMaxMetadataDepth = 32
	reqMaxCancelKey     = 255
)

// ParseRequest decodes and validates a POST /api/messages body. It
// returns *msgapi.Error (CodeInvalid) listing every bad field at once;
// malformed JSON is CodeInvalid with a clear message and no Fields. A body
// over 1 MiB is CodeTooLarge.
//
// The body is decoded field by field from raw JSON rather than into a struct,
// so that a wrong type ("body": 5) is reported against its field together
// with every other problem, instead of stopping the decode at the first one.
// Keys are matched exactly (encoding/json would match "BODY" to body);
// unknown keys are ignored; null means absent. A key given twice is an error:
// decoders disagree on which copy wins, and the idempotency fingerprint must
// not read a different request than the one that is sent. Errors are listed
// in a fixed field order, not in input order:
// channel, recipientPhone, recipientEmail, leadId, body, subject,
// attachments, the CRM references, metadata.
//
// When leadId is set, a missing recipient is not an error here: the lead may
// supply it, and FillFromLead checks once the lead is read. A recipient that
// is given but invalid is always an error.
func ParseRequest(body []byte, defaultRegion string) (Request, error) {
	if len(body) > reqMaxRequest {
		return Request{}, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than %d bytes", reqMaxRequest)
	}
	fields, dups, err := parseObject(body)
	if err != nil {
		return Request{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: err.Error()}
	}
	v := &reqValidator{fields: fields, dups: dups}
	var r Request

	channel, _ := v.str("channel", "")
	switch {
	case v.failed("channel"):
	case channel == "":
		v.add("channel", `is required: one of "sms", "imessage", "email"`)
	case channel == messages.ChannelSMS || channel == messages.ChannelIMessage || channel == messages.ChannelEmail:
		r.Channel = channel
	default:
		v.add("channel", `must be one of "sms", "imessage", "email"`)
	}

	// A recipient that is empty or blank is absent: CRMs fill unknown merge
	// fields with "". A CRM that sends a blank phone for an sms still gets
	// "is required", which names the real problem.
	if s, _ := v.str("recipientPhone", ""); strings.TrimSpace(s) != "" {
		if p, err := contact.NormalizePhone(s, defaultRegion); err != nil {
			v.add("recipientPhone", err.Error())
		} else {
			r.RecipientPhone = p
		}
	}
	if s, _ := v.str("recipientEmail", ""); strings.TrimSpace(s) != "" {
		if e, err := contact.NormalizeEmail(s); err != nil {
			v.add("recipientEmail", err.Error())
		} else {
			r.RecipientEmail = e
		}
	}

	leadID, _ := v.str("leadId", "")
	if leadID != "" {
		if len(leadID) > reqMaxLeadID || !reqPrintable(leadID) {
			v.add("leadId", fmt.Sprintf("must be at most %d bytes of printable characters", reqMaxLeadID))
		} else {
			r.LeadID = leadID
		}
	}
	// An invalid leadId still says the caller meant a lead: do not add
	// "recipient required" errors that fixing the leadId would resolve.
	if leadID == "" && !v.failed("leadId") && r.Channel != "" {
		// A recipient that was given but invalid has its own error already.
		field, msg := r.validateRecipient()
		given := v.failed(field) || (r.Channel == messages.ChannelIMessage && v.failed("recipientEmail"))
		if field != "" && !given {
			v.add(field, msg)
		}
	}

	// A body of only whitespace is treated as empty: it is almost always a
	// CRM template whose merge fields rendered to nothing, and sending it
	// would put a blank message in front of a person. The body is otherwise
	// kept byte for byte — it is part of the duplicate guard's identity.
	text, _ := v.str("body", "")
	switch {
	case v.failed("body"):
	case strings.TrimSpace(text) == "":
		v.add("body", "is required and must not be blank")
	case r.Channel == messages.ChannelSMS && utf8.RuneCountInString(text) > reqMaxSMSBody:
		v.add("body", fmt.Sprintf("must be at most %d characters for sms", reqMaxSMSBody))
	case len(text) > reqMaxBody:
		v.add("body", fmt.Sprintf("must be at most %d bytes", reqMaxBody))
	default:
		r.Body = text
	}

	// An empty subject is absent, on any channel.
	if s, _ := v.str("subject", ""); s != "" {
		switch {
		case r.Channel != "" && r.Channel != messages.ChannelEmail:
			v.add("subject", "is only allowed for channel email")
		case len(s) > reqMaxSubject:
			v.add("subject", fmt.Sprintf("must be at most %d bytes", reqMaxSubject))
		case strings.ContainsFunc(s, func(c rune) bool { return c != '\t' && unicode.IsControl(c) }):
			// CR and LF would let the caller add mail headers.
			v.add("subject", "must not contain line breaks or control characters")
		default:
			r.Subject = s
		}
	}

	r.Attachments = v.attachments()

	for _, ref := range []struct {
		name    string
		dst     *string
		numeric bool // HubSpot sends its ids as JSON numbers
	}{
		{"ghlContactId", &r.CRM.GHLContactID, false},
		{"ghlLocationId", &r.CRM.GHLLocationID, false},
		{"hsContactId", &r.CRM.HSContactID, true},
		{"hsPortalId", &r.CRM.HSPortalID, true},
	} {
		var s string
		if raw := v.fields[ref.name]; ref.numeric && !v.dups[ref.name] && len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			n, ok := crmNumber(raw)
			if !ok {
				v.add(ref.name, fmt.Sprintf("must be a string or an integer from 0 to %d", reqMaxCRMNumber))
				continue
			}
			s = n
		} else {
			s, _ = v.str(ref.name, "")
		}
		switch {
		case len(s) > reqMaxCRMRef:
			v.add(ref.name, fmt.Sprintf("must be at most %d bytes", reqMaxCRMRef))
		case strings.ContainsFunc(s, unicode.IsControl):
			v.add(ref.name, "must not contain control characters")
		default:
			*ref.dst = s
		}
	}

	r.Metadata = v.metadata()

	if s, _ := v.str("sendAt", ""); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			v.add("sendAt", "must be an RFC 3339 date-time with a time zone, such as 2026-12-24T09:00:00-05:00")
		} else {
			r.SendAt = t.UTC()
		}
	}
	if s, _ := v.str("cancellationKey", ""); s != "" {
		if len(s) > reqMaxCancelKey || !reqPrintable(s) {
			v.add("cancellationKey", fmt.Sprintf("must be at most %d bytes of printable characters", reqMaxCancelKey))
		} else {
			r.CancellationKey = s
		}
	}

	switch raw := string(v.fields["ignoreQuietHours"]); {
	case v.dups["ignoreQuietHours"]:
		v.add("ignoreQuietHours", "must appear only once")
	case raw == "true":
		r.IgnoreQuietHours = true
	case raw != "" && raw != "false" && raw != "null":
		v.add("ignoreQuietHours", "must be true or false")
	}

	if len(v.errs) > 0 {
		slices.SortStableFunc(v.errs, func(a, b msgapi.FieldError) int {
			return cmp.Compare(reqFieldRank(a.Field), reqFieldRank(b.Field))
		})
		return Request{}, &msgapi.Error{
			Code:    msgapi.CodeInvalid,
			Message: "the request has invalid fields; see errors",
			Fields:  v.errs,
		}
	}
	return r, nil
}

// Scheduling bounds (README: Scheduled sends). A sendAt less than
// scheduleMinLead ahead is sent at once, and so is one that passed less
// than scheduleLate ago: a CRM's retry of a scheduled request that comes
// after its time must not fail the workflow. Earlier than that, or further
// ahead than schedule.MaxAhead, is refused.
const (
	scheduleMinLead = time.Second
	scheduleLate    = 10 * time.Minute
)

// Scheduled reports whether the request is a scheduled send at now, or
// returns the *msgapi.Error (CodeInvalid) for a sendAt out of bounds.
func (r Request) Scheduled(now time.Time, maxAhead time.Duration) (bool, error) {
	if r.SendAt.IsZero() {
		return false, nil
	}
	var msg string
	switch {
	case r.SendAt.Before(now.Add(-scheduleLate)):
		msg = fmt.Sprintf("is more than %s in the past", scheduleLate)
	case r.SendAt.After(now.Add(maxAhead)):
		msg = fmt.Sprintf("must be at most %d days ahead", int(maxAhead/(24*time.Hour)))
	default:
		return r.SendAt.After(now.Add(scheduleMinLead)), nil
	}
	return false, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the request has invalid fields; see errors",
		Fields: []msgapi.FieldError{{Field: "sendAt", Message: msg}}}
}

// FillFromLead fills missing recipients from a lead's phone and email (used
// when leadId is given) and then enforces the per-channel recipient
// requirement. It returns *msgapi.Error (CodeInvalid) naming the field.
// Recipients the request gave win over the lead's.
func (r *Request) FillFromLead(phone, email string) error {
	if r.RecipientPhone == "" {
		r.RecipientPhone = phone
	}
	if r.RecipientEmail == "" {
		r.RecipientEmail = email
	}
	field, msg := r.validateRecipient()
	if field == "" {
		return nil
	}
	if field != "channel" {
		msg += ", and the lead has none"
	}
	return &msgapi.Error{
		Code:    msgapi.CodeInvalid,
		Message: "the request has invalid fields; see errors",
		Fields:  []msgapi.FieldError{{Field: field, Message: msg}},
	}
}

// DeliveryAddress returns the address the message actually goes to: sms →
// phone; email → email; imessage → phone when present, else email. For a
// request that passed ParseRequest without leadId, or FillFromLead,
// exactly one of the two results is non-empty.
func (r Request) DeliveryAddress() (phone, email string) {
	switch r.Channel {
	case messages.ChannelSMS:
		return r.RecipientPhone, ""
	case messages.ChannelEmail:
		return "", r.RecipientEmail
	case messages.ChannelIMessage:
		if r.RecipientPhone != "" {
			return r.RecipientPhone, ""
		}
		return "", r.RecipientEmail
	}
	return "", ""
}

// validateRecipient reports the field whose absence makes r undeliverable on
// its channel, or "" when it has what the channel needs.
func (r *Request) validateRecipient() (field, msg string) {
	switch r.Channel {
	case messages.ChannelSMS:
		if r.RecipientPhone == "" {
			return "recipientPhone", "is required for channel sms"
		}
	case messages.ChannelEmail:
		if r.RecipientEmail == "" {
			return "recipientEmail", "is required for channel email"
		}
	case messages.ChannelIMessage:
		if r.RecipientPhone == "" && r.RecipientEmail == "" {
			return "recipientPhone", "recipientPhone or recipientEmail is required for channel imessage"
		}
	default:
		return "channel", `must be one of "sms", "imessage", "email"`
	}
	return "", ""
}

// reqMaxCRMNumber is the largest CRM id accepted as a JSON number: the
// largest integer a float64 (and so JavaScript, and the schema validators
// that read JSON numbers as float64) holds exactly. HubSpot's ids are far
// below it.
const reqMaxCRMNumber = 1<<53 - 1

// crmNumber turns a JSON number into the decimal string it is stored and
// echoed as (42 → "42", 4.2e1 → "42"). It reads the number as a float64,
// as schema validators do, so that the document's integer rule and the
// parser agree on every input; within the accepted range the conversion
// is exact.
func crmNumber(raw json.RawMessage) (string, bool) {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > reqMaxCRMNumber {
		return "", false
	}
	return strconv.FormatFloat(math.Abs(f), 'f', -1, 64), true // -0 is "0"
}

// reqFieldRank orders a field path ("attachments[2].url") by its top-level
// field, in the order ParseRequest documents.
func reqFieldRank(path string) int {
	if i := strings.IndexAny(path, "[."); i >= 0 {
		path = path[:i]
	}
	return slices.Index([]string{
		"channel", "recipientPhone", "recipientEmail", "leadId", "body", "subject", "attachments",
		"ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId", "metadata", "sendAt", "cancellationKey", "ignoreQuietHours",
	}, path)
}

func (v *reqValidator) attachments() []messages.Attachment {
	const key = "attachments"
	if v.dups[key] {
		v.add(key, "must appear only once")
		return nil
	}
	raw := v.fields[key]
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		v.add(key, "must be an array")
		return nil
	}
	if len(items) > reqMaxAttachments {
		// Items are not checked: the list is refused as a whole, and a
		// thousand items should not produce a thousand errors.
		v.add(key, fmt.Sprintf("must have at most %d items", reqMaxAttachments))
		return nil
	}
	var out []messages.Attachment
	for i, item := range items {
		path := fmt.Sprintf("%s[%d]", key, i)
		if item[0] != '{' {
			v.add(path, "must be an object")
			continue
		}
		fields, dups, err := parseObject(item)
		if err != nil {
			v.add(path, "must be an object")
			continue
		}
		av := &reqValidator{fields: fields, dups: dups}
		a := messages.Attachment{}
		if s, ok := av.str("url", path+".url"); ok {
			if s == "" {
				av.add(path+".url", "is required")
			} else if msg := validateAttachmentURL(s); msg != "" {
				av.add(path+".url", msg)
			} else {
				a.URL = s
			}
		}
		if s, _ := av.str("filename", path+".filename"); s != "" {
			if msg := validateFilename(s); msg != "" {
				av.add(path+".filename", msg)
			} else {
				a.Filename = s
			}
		}
		if s, _ := av.str("contentType", path+".contentType"); s != "" {
			mt, _, err := mime.ParseMediaType(s)
			if len(s) > reqMaxContentType || err != nil || !strings.Contains(mt, "/") {
				av.add(path+".contentType", "must be a media type such as image/png")
			} else {
				a.ContentType = s
			}
		}
		v.errs = append(v.errs, av.errs...)
		out = append(out, a)
	}
	return out
}

// validateAttachmentURL requires an absolute https URL with a host. The
// provider fetches it, so credentials in the URL (they would be stored and
// echoed back) and unencoded spaces are refused too.
func validateAttachmentURL(s string) string {
	if len(s) > reqMaxURL {
		return fmt.Sprintf("must be at most %d bytes", reqMaxURL)
	}
	if strings.ContainsFunc(s, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) {
		return "must not contain spaces or control characters (percent-encode them)"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return "must be an absolute https URL"
	}
	if u.User != nil {
		return "must not contain credentials"
	}
	return ""
}

// validateFilename keeps the name a plain file name: it ends up in MIME
// headers and may be written to disk by a relay.
func validateFilename(s string) string {
	switch {
	case len(s) > reqMaxFilename:
		return fmt.Sprintf("must be at most %d bytes", reqMaxFilename)
	case strings.ContainsAny(s, `/\`) || s == "." || s == "..":
		return "must be a file name without path separators"
	case strings.ContainsFunc(s, unicode.IsControl):
		return "must not contain control characters"
	}
	return ""
}

func reqPrintable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}
