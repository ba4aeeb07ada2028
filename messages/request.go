package messages

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
)

// The channels a message can be sent on.
const (
	ChannelSMS      = "sms"
	ChannelIMessage = "imessage"
	ChannelEmail    = "email"
)

// Attachment is a file the provider fetches and attaches; the API never
// downloads it itself.
type Attachment struct {
	URL         string `json:"url" bson:"url"`
	Filename    string `json:"filename,omitempty" bson:"filename,omitempty"`
	ContentType string `json:"contentType,omitempty" bson:"contentType,omitempty"`
}

// CRMRefs are the caller's CRM identifiers for a lead, stored on the lead and
// echoed back. They are opaque to msgapi.
type CRMRefs struct {
	GHLContactID  string `json:"ghlContactId,omitempty" bson:"ghlContactId,omitempty"`
	GHLLocationID string `json:"ghlLocationId,omitempty" bson:"ghlLocationId,omitempty"`
	HSContactID   string `json:"hsContactId,omitempty" bson:"hsContactId,omitempty"`
	HSPortalID    string `json:"hsPortalId,omitempty" bson:"hsPortalId,omitempty"`
}

// SendRequest is a validated POST /api/messages body. Recipients are
// normalised (contact.NormalizePhone, contact.NormalizeEmail); Body is
// exactly what the caller sent.
type SendRequest struct {
	Channel        string // ChannelSMS, ChannelIMessage or ChannelEmail
	RecipientPhone string // E.164 or ""
	RecipientEmail string // lower case or ""
	LeadID         string
	Body           string
	Subject        string
	Attachments    []Attachment
	CRM            CRMRefs
	Metadata       map[string]any // numbers are json.Number
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
)

// ParseSendRequest decodes and validates a POST /api/messages body. It
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
func ParseSendRequest(body []byte, defaultRegion string) (SendRequest, error) {
	if len(body) > reqMaxRequest {
		return SendRequest{}, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than %d bytes", reqMaxRequest)
	}
	fields, dups, err := parseObject(body)
	if err != nil {
		return SendRequest{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: err.Error()}
	}
	v := &reqValidator{fields: fields, dups: dups}
	var r SendRequest

	channel, _ := v.str("channel", "")
	switch {
	case v.failed("channel"):
	case channel == "":
		v.add("channel", `is required: one of "sms", "imessage", "email"`)
	case channel == ChannelSMS || channel == ChannelIMessage || channel == ChannelEmail:
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
		given := v.failed(field) || (r.Channel == ChannelIMessage && v.failed("recipientEmail"))
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
	case r.Channel == ChannelSMS && utf8.RuneCountInString(text) > reqMaxSMSBody:
		v.add("body", fmt.Sprintf("must be at most %d characters for sms", reqMaxSMSBody))
	case len(text) > reqMaxBody:
		v.add("body", fmt.Sprintf("must be at most %d bytes", reqMaxBody))
	default:
		r.Body = text
	}

	// An empty subject is absent, on any channel.
	if s, _ := v.str("subject", ""); s != "" {
		switch {
		case r.Channel != "" && r.Channel != ChannelEmail:
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

	if len(v.errs) > 0 {
		slices.SortStableFunc(v.errs, func(a, b msgapi.FieldError) int {
			return cmp.Compare(reqFieldRank(a.Field), reqFieldRank(b.Field))
		})
		return SendRequest{}, &msgapi.Error{
			Code:    msgapi.CodeInvalid,
			Message: "the request has invalid fields; see errors",
			Fields:  v.errs,
		}
	}
	return r, nil
}

// FillFromLead fills missing recipients from a lead's phone and email (used
// when leadId is given) and then enforces the per-channel recipient
// requirement. It returns *msgapi.Error (CodeInvalid) naming the field.
// Recipients the request gave win over the lead's.
func (r *SendRequest) FillFromLead(phone, email string) error {
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
// request that passed ParseSendRequest without leadId, or FillFromLead,
// exactly one of the two results is non-empty.
func (r SendRequest) DeliveryAddress() (phone, email string) {
	switch r.Channel {
	case ChannelSMS:
		return r.RecipientPhone, ""
	case ChannelEmail:
		return "", r.RecipientEmail
	case ChannelIMessage:
		if r.RecipientPhone != "" {
			return r.RecipientPhone, ""
		}
		return "", r.RecipientEmail
	}
	return "", ""
}

// validateRecipient reports the field whose absence makes r undeliverable on
// its channel, or "" when it has what the channel needs.
func (r *SendRequest) validateRecipient() (field, msg string) {
	switch r.Channel {
	case ChannelSMS:
		if r.RecipientPhone == "" {
			return "recipientPhone", "is required for channel sms"
		}
	case ChannelEmail:
		if r.RecipientEmail == "" {
			return "recipientEmail", "is required for channel email"
		}
	case ChannelIMessage:
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
// field, in the order ParseSendRequest documents.
func reqFieldRank(path string) int {
	if i := strings.IndexAny(path, "[."); i >= 0 {
		path = path[:i]
	}
	return slices.Index([]string{
		"channel", "recipientPhone", "recipientEmail", "leadId", "body", "subject", "attachments",
		"ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId", "metadata",
	}, path)
}

// reqValidator collects field errors while the fields of one object are read.
type reqValidator struct {
	fields map[string]json.RawMessage
	dups   map[string]bool
	errs   []msgapi.FieldError
}

func (v *reqValidator) add(field, msg string) {
	v.errs = append(v.errs, msgapi.FieldError{Field: field, Message: msg})
}

func (v *reqValidator) failed(field string) bool {
	for _, e := range v.errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// str reads the string field key of v.fields, reporting a problem as field
// path. Absent, null and wrong values all return "", false.
func (v *reqValidator) str(key, path string) (string, bool) {
	if path == "" {
		path = key
	}
	if v.dups[key] {
		v.add(path, "must appear only once")
		return "", false
	}
	s, msg := parseString(v.fields[key])
	if msg != "" {
		v.add(path, msg)
		return "", false
	}
	return s, true
}

// parseString decodes a raw JSON string. Absent and null are "" with no
// problem; anything else that is not valid UTF-8 text is a problem.
func parseString(raw json.RawMessage) (s, problem string) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	if raw[0] != '"' {
		return "", "must be a string"
	}
	if !reqValidText(raw) {
		return "", "must be valid UTF-8 (no invalid bytes or unpaired surrogates)"
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "must be a string"
	}
	return s, ""
}

func (v *reqValidator) attachments() []Attachment {
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
	var out []Attachment
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
		a := Attachment{}
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

// metadata returns the metadata object with its numbers as json.Number, so
// they round-trip exactly. Besides the size limit it refuses what the stores
// cannot hold, so that a bad object is a 400 here and not a 500 at insert
// time: keys starting with "$" or containing "." or NUL, arrays nested
// directly in arrays, and numbers beyond float64 (the embedded engine
// rejects all of these; BSON keys cannot contain NUL), and nesting deeper
// than reqMaxMetadataDepth (MongoDB allows 100 levels per document).
func (v *reqValidator) metadata() map[string]any {
	const key = "metadata"
	if v.dups[key] {
		v.add(key, "must appear only once")
		return nil
	}
	raw := v.fields[key]
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] != '{' {
		v.add(key, "must be a JSON object")
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		v.add(key, "must be a JSON object")
		return nil
	}
	if compact.Len() > reqMaxMetadata {
		v.add(key, fmt.Sprintf("must be at most %d bytes as compact JSON", reqMaxMetadata))
		return nil
	}
	if !reqValidText(raw) {
		v.add(key, "must be valid UTF-8 (no invalid bytes or unpaired surrogates)")
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		v.add(key, "must be a JSON object")
		return nil
	}
	val, err := parseMetadataValue(dec, tok, key, 0)
	if err != nil {
		v.add(key, err.Error())
		return nil
	}
	m, _ := val.(map[string]any)
	return m
}

// parseMetadataValue decodes the value that starts with tok. path names it
// in errors, e.g. metadata.order.items[2].
func parseMetadataValue(dec *json.Decoder, tok json.Token, path string, depth int) (any, error) {
	if depth >= reqMaxMetadataDepth {
		return nil, fmt.Errorf("must not be nested more than %d levels deep", reqMaxMetadataDepth)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, errors.New("must be a JSON object")
				}
				k, _ := kt.(string)
				kpath := parseMetadataPath(path, k)
				if strings.HasPrefix(k, "$") || strings.ContainsAny(k, ".\x00") {
					return nil, fmt.Errorf(`keys must not start with "$" or contain "." or NUL (at %s)`, kpath)
				}
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("keys must appear only once (at %s)", kpath)
				}
				vt, err := dec.Token()
				if err != nil {
					return nil, errors.New("must be a JSON object")
				}
				val, err := parseMetadataValue(dec, vt, kpath, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = val
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, errors.New("must be a JSON object")
			}
			return m, nil
		}
		a := []any{}
		for i := 0; dec.More(); i++ {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			vt, err := dec.Token()
			if err != nil {
				return nil, errors.New("must be a JSON object")
			}
			if vt == json.Delim('[') {
				return nil, fmt.Errorf("arrays must not directly contain arrays (at %s)", ipath)
			}
			val, err := parseMetadataValue(dec, vt, ipath, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, val)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, errors.New("must be a JSON object")
		}
		return a, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(t), 64); err != nil {
			return nil, fmt.Errorf("numbers must fit in a 64-bit float (at %s)", path)
		}
		return t, nil
	}
	return tok, nil // string, bool or nil
}

// parseMetadataPath extends path by key, shortening long keys so that an
// error message stays readable.
func parseMetadataPath(path, key string) string {
	const max = 40
	if len(key) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		key = key[:cut] + "…"
	}
	return path + "." + key
}

// parseObject splits a JSON object into its members without decoding them,
// and reports the keys that occur more than once. Its error text is shown to
// the client.
func parseObject(data []byte) (map[string]json.RawMessage, map[string]bool, error) {
	trimmed := bytes.Trim(data, " \t\r\n") // JSON's white space only, as the fingerprint sees it
	if len(trimmed) == 0 {
		return nil, nil, errors.New("the request body is empty; send a JSON object")
	}
	if err := json.Unmarshal(trimmed, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, fmt.Errorf("the request body is not valid JSON: %s (at byte %d)", se.Error(), se.Offset)
		}
		return nil, nil, errors.New("the request body is not valid JSON")
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, nil, errors.New("the request body must be a JSON object")
	}
	fields := map[string]json.RawMessage{}
	var dups map[string]bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, errors.New("the request body is not valid JSON")
		}
		k, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, errors.New("the request body is not valid JSON")
		}
		if _, ok := fields[k]; ok {
			if dups == nil {
				dups = map[string]bool{}
			}
			dups[k] = true
		}
		fields[k] = raw
	}
	return fields, dups, nil
}

// reqValidText reports whether raw JSON text holds valid Unicode: valid
// UTF-8, and no \u escape of an unpaired UTF-16 surrogate. encoding/json
// would silently turn either into U+FFFD, changing the text.
func reqValidText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; in valid JSON there is one
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := reqHex4(raw[i+1:])
		if !ok {
			return false
		}
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xDC00 { // a low surrogate without a high one before it
			return false
		}
		rest := raw[i+1:]
		if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
			return false
		}
		lo, ok := reqHex4(rest[2:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return false
		}
		i += 6
	}
	return true
}

func reqHex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

func reqPrintable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}
