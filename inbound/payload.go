package inbound

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/vendorsig"
)

// event is one delivery, parsed: the vendor's dedup key and what becomes the
// inbound message.
type event struct {
	channel    string // the webhook channel (vendor)
	medium     string // the message's channel: slack, sms, whatsapp, telegram, email
	key        string // the vendor's id for this event
	providerID string // the vendor's id for the message itself, when it has one

	// The sender as a lead address: exactly one of phone (E.164) and email.
	phone, email string
	from, to     string // as the vendor gave them

	text, subject string
	media         []messages.Attachment // by URL only: not content-deduplicated
	platformFiles []map[string]any      // by vendor file id only (Telegram)
	files         []file                // bytes carried in the payload: hashed

	challenge string // Slack url_verification: answer it, record nothing
	notice    bool   // a vendor notice that is not an event: 200, record nothing
}

// file is an attachment whose bytes arrived in the payload.
type file struct {
	name, contentType string
	data              []byte
}

// maxKey bounds a dedup key (an RFC 5322 line is at most 998 bytes, the
// longest a Message-ID can be).
const maxKey = 998

func invalid(format string, args ...any) error {
	return msgapi.Errorf(msgapi.CodeInvalid, format, args...)
}

func parse(ch, contentType string, body []byte) (event, error) {
	var (
		ev  event
		err error
	)
	switch ch {
	case ChannelSlack:
		ev, err = parseSlack(body)
	case ChannelTwilio:
		ev, err = parseTwilio(contentType, body)
	case ChannelTelegram:
		ev, err = parseTelegram(body)
	case ChannelEmail:
		ev, err = parseRelay(body)
	}
	if err != nil || ev.challenge != "" || ev.notice {
		return ev, err
	}
	ev.channel = ch
	if err := checkKey(ev.key); err != nil {
		return event{}, err
	}
	return ev, nil
}

// checkKey refuses a key we cannot store faithfully. A missing key is a 400:
// a key made up by the receiver would never match the vendor's retry.
func checkKey(k string) error {
	switch {
	case k == "":
		return invalid("the payload carries no usable event id to de-duplicate on")
	case len(k) > maxKey:
		return invalid("the payload's event id is longer than %d bytes", maxKey)
	case !utf8.ValidString(k):
		return invalid("the payload's event id is not valid UTF-8")
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return invalid("the payload's event id contains control characters")
		}
	}
	return nil
}

// Slack Events API: https://api.slack.com/apis/events-api
type slackEnvelope struct {
	Type      string      `json:"type"`
	Challenge string      `json:"challenge"`
	TeamID    string      `json:"team_id"`
	EventID   string      `json:"event_id"`
	Event     *slackEvent `json:"event"`
}

type slackEvent struct {
	Type    string `json:"type"`
	User    string `json:"user"`
	BotID   string `json:"bot_id"`
	Team    string `json:"team"`
	Text    string `json:"text"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	EventTS string `json:"event_ts"`
	Files   []struct {
		Name       string `json:"name"`
		Mimetype   string `json:"mimetype"`
		URLPrivate string `json:"url_private"`
	} `json:"files"`
}

func parseSlack(body []byte) (event, error) {
	var env slackEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return event{}, invalid("the Slack payload is not a JSON object")
	}
	switch env.Type {
	case "url_verification":
		if env.Challenge == "" {
			return event{}, invalid("url_verification without a challenge")
		}
		return event{challenge: env.Challenge}, nil
	case "app_rate_limited":
		return event{notice: true}, nil
	case "event_callback":
	default:
		return event{}, invalid("unsupported Slack payload type %q", env.Type)
	}
	if env.Event == nil {
		return event{}, invalid("event_callback without an event")
	}
	e := env.Event
	ev := event{medium: ChannelSlack, key: env.EventID, providerID: e.TS, text: e.Text, from: e.User, to: e.Channel}
	if ev.key == "" && e.EventTS != "" {
		// event_ts is unique only within a Slack channel: qualify it.
		ev.key = "ts:" + e.Channel + ":" + e.EventTS
	}
	team := cmp.Or(e.Team, env.TeamID)
	sender := cmp.Or(e.User, e.BotID)
	ev.email = platformAddress(ChannelSlack, team, sender)
	if ev.from == "" {
		ev.from = e.BotID
	}
	for _, f := range e.Files {
		if f.URLPrivate != "" {
			ev.media = append(ev.media, messages.Attachment{URL: f.URLPrivate, Filename: f.Name, ContentType: f.Mimetype})
		}
	}
	return ev, nil
}

// Twilio messaging webhook: a form POST with MessageSid, From, To, Body,
// NumMedia and MediaUrl{i} / MediaContentType{i}.
func parseTwilio(contentType string, body []byte) (event, error) {
	if !vendorsig.IsForm(contentType) {
		return event{}, msgapi.Errorf(msgapi.CodeUnsupportedMedia, "Twilio webhooks must be application/x-www-form-urlencoded")
	}
	p, err := url.ParseQuery(string(body))
	if err != nil {
		return event{}, invalid("the Twilio form body cannot be parsed")
	}
	if st := p.Get("MessageStatus"); st != "" && st != "received" {
		// A status callback for an outbound message pointed here: not an
		// inbound message.
		return event{notice: true}, nil
	}
	ev := event{medium: messages.ChannelSMS, key: p.Get("MessageSid"), providerID: p.Get("MessageSid"),
		text: p.Get("Body"), from: p.Get("From"), to: p.Get("To")}
	from := ev.from
	if rest, ok := strings.CutPrefix(from, "whatsapp:"); ok {
		ev.medium, from = "whatsapp", rest
	}
	if phone, err := contact.NormalizePhone(from, ""); err == nil {
		ev.phone = phone
	} else if from != "" {
		ev.email = platformAddress(ChannelTwilio, from) // short code or alphanumeric sender
	} else {
		return event{}, invalid("the Twilio payload has no From")
	}
	n, _ := strconv.Atoi(p.Get("NumMedia"))
	for i := range min(n, 20) {
		if u := p.Get(fmt.Sprintf("MediaUrl%d", i)); u != "" {
			ev.media = append(ev.media, messages.Attachment{URL: u, ContentType: p.Get(fmt.Sprintf("MediaContentType%d", i))})
		}
	}
	return ev, nil
}

// Telegram Bot API Update: https://core.telegram.org/bots/api#update
type telegramUpdate struct {
	UpdateID          *int64           `json:"update_id"`
	Message           *telegramMessage `json:"message"`
	EditedMessage     *telegramMessage `json:"edited_message"`
	ChannelPost       *telegramMessage `json:"channel_post"`
	EditedChannelPost *telegramMessage `json:"edited_channel_post"`
	BusinessMessage   *telegramMessage `json:"business_message"`
}

type telegramFile struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name"`
	MimeType     string `json:"mime_type"`
}

type telegramMessage struct {
	MessageID int64 `json:"message_id"`
	From      *struct {
		ID int64 `json:"id"`
	} `json:"from"`
	SenderChat *struct {
		ID int64 `json:"id"`
	} `json:"sender_chat"`
	Chat struct {
		ID int64 `json:"id"`
	} `json:"chat"`
	Text    string `json:"text"`
	Caption string `json:"caption"`
	Contact *struct {
		PhoneNumber string `json:"phone_number"`
		UserID      int64  `json:"user_id"`
	} `json:"contact"`
	Document *telegramFile  `json:"document"`
	Photo    []telegramFile `json:"photo"`
}

func parseTelegram(body []byte) (event, error) {
	var u telegramUpdate
	if err := json.Unmarshal(body, &u); err != nil {
		return event{}, invalid("the Telegram payload is not a JSON Update")
	}
	if u.UpdateID == nil {
		return event{}, invalid("the Telegram Update has no update_id")
	}
	m := u.Message
	for _, alt := range []*telegramMessage{u.EditedMessage, u.ChannelPost, u.EditedChannelPost, u.BusinessMessage} {
		if m == nil {
			m = alt
		}
	}
	if m == nil {
		// callback_query, my_chat_member, poll…: not a message, nothing to record.
		return event{notice: true}, nil
	}
	ev := event{medium: ChannelTelegram, key: strconv.FormatInt(*u.UpdateID, 10),
		providerID: strconv.FormatInt(m.Chat.ID, 10) + "/" + strconv.FormatInt(m.MessageID, 10),
		text:       cmp.Or(m.Text, m.Caption), to: strconv.FormatInt(m.Chat.ID, 10)}
	sender := m.Chat.ID
	switch {
	case m.From != nil:
		sender = m.From.ID
	case m.SenderChat != nil:
		sender = m.SenderChat.ID
	}
	ev.from = strconv.FormatInt(sender, 10)
	// A user who shares their own contact card tells us their phone.
	if c := m.Contact; c != nil && m.From != nil && c.UserID == m.From.ID {
		if phone, err := contact.NormalizePhone(plus(c.PhoneNumber), ""); err == nil {
			ev.phone = phone
		}
	}
	if ev.phone == "" {
		ev.email = platformAddress(ChannelTelegram, ev.from)
	}
	files := m.Photo
	if len(files) > 0 {
		files = files[len(files)-1:] // the sizes of one photo: keep the largest
	}
	if m.Document != nil {
		files = append(files, *m.Document)
	}
	for _, f := range files {
		ev.platformFiles = append(ev.platformFiles, map[string]any{
			"fileId": f.FileID, "fileUniqueId": f.FileUniqueID, "filename": f.FileName, "contentType": f.MimeType})
	}
	return ev, nil
}

// plus adds the "+" Telegram leaves off contact phone numbers.
func plus(p string) string {
	if p != "" && !strings.HasPrefix(p, "+") {
		return "+" + p
	}
	return p
}

// Relay is the JSON an email relay (an inbound-mail service, or a small
// script behind the MX) posts to the email webhook, signed with
// X-Msgapi-Signature. Headers carries at least Message-ID, the dedup key.
type Relay struct {
	Headers     map[string]string `json:"headers"`
	From        string            `json:"from"`
	To          []string          `json:"to"`
	Subject     string            `json:"subject"`
	Text        string            `json:"text"`
	Attachments []RelayAttachment `json:"attachments"`
}

// RelayAttachment is one file of a relayed email, its bytes in base64.
type RelayAttachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

// maxRelayAttachments bounds the files of one relayed email.
const maxRelayAttachments = 100

func parseRelay(body []byte) (event, error) {
	var r Relay
	if err := json.Unmarshal(body, &r); err != nil {
		return event{}, invalid("the email relay payload is not the documented JSON object")
	}
	var msgID string
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Message-ID") {
			msgID = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v), "<"), ">")
		}
	}
	addr, err := mail.ParseAddress(r.From)
	if err != nil {
		return event{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the relayed email has no valid From address",
			Fields: []msgapi.FieldError{{Field: "from", Message: "an RFC 5322 address is required"}}}
	}
	email, err := contact.NormalizeEmail(addr.Address)
	if err != nil {
		return event{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the relayed email has no valid From address",
			Fields: []msgapi.FieldError{{Field: "from", Message: err.Error()}}}
	}
	ev := event{medium: messages.ChannelEmail, key: msgID, providerID: msgID, email: email,
		from: r.From, to: strings.Join(r.To, ", "), text: r.Text, subject: r.Subject}
	if len(r.Attachments) > maxRelayAttachments {
		return event{}, invalid("a relayed email carries at most %d attachments", maxRelayAttachments)
	}
	for i, a := range r.Attachments {
		data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(a.Content), ""))
		if err != nil {
			return event{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "an attachment's content is not base64",
				Fields: []msgapi.FieldError{{Field: fmt.Sprintf("attachments[%d].content", i), Message: "standard base64 is required"}}}
		}
		ev.files = append(ev.files, file{name: a.Filename, contentType: a.ContentType, data: data})
	}
	return ev, nil
}

// platformAddress is the lead address of a sender known only by a platform
// id (a Slack user, a Telegram chat): an address under the reserved .invalid
// domain (RFC 2606), one per platform identity, so the sender gets one lead
// and one thread through the messages store, and no mail can ever be
// delivered to it.
func platformAddress(vendor string, ids ...string) string {
	local := vendor
	for _, id := range ids {
		if id != "" {
			local += "." + addressPart(id)
		}
	}
	if len(local) > 64 {
		sum := sha256.Sum256([]byte(local))
		local = vendor + ".h" + hex.EncodeToString(sum[:20])
	}
	return local + "@" + vendor + ".invalid"
}

// addressPart keeps an id that is already safe in a local part (Slack and
// Telegram ids are), lower-cased, and hex-encodes anything else. The check
// comes before lower-casing, which would turn some non-ASCII letters into
// ASCII ones (the Kelvin sign into "k") and make two senders one lead.
func addressPart(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' {
			return "h" + hex.EncodeToString([]byte(id))
		}
	}
	return strings.ToLower(id)
}
