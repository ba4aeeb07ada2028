package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store"
)

// Inbound message fields.
const (
	DirectionInbound = "inbound"
	StatusReceived   = "received"
)

// Layers of InboundDuplicate.
const (
	LayerFastpath = "fastpath" // Redis said "completed"
	LayerStore    = "store"    // MongoDB said so
)

// eventRecord says "this event is completely recorded". It is written last,
// so its presence implies every other artefact of the event exists.
type eventRecord struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	Channel     string    `bson:"channel"`
	Key         string    `bson:"key"`
	MessageID   string    `bson:"messageId"`
	Duplicates  []dupOf   `bson:"contentDuplicates,omitempty"`
	CreatedAt   time.Time `bson:"createdAt"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

// dupOf names the earlier message that already carried an attachment.
type dupOf struct {
	SHA256    string `bson:"sha256"`
	MessageID string `bson:"messageId"`
}

// attachmentRecord names the first message of a workspace that carried
// these bytes. Its _id is (workspace, SHA-256): filenames play no part.
type attachmentRecord struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	SHA256      string    `bson:"sha256"`
	Size        int       `bson:"size"`
	ContentType string    `bson:"contentType,omitempty"`
	MessageID   string    `bson:"messageId"`
	CreatedAt   time.Time `bson:"createdAt"`
}

// EventID is the _id of an event's completion record.
func EventID(workspaceID, channel, key string) string {
	return "ie_" + msgapi.HashID("event", workspaceID, channel, key)
}

// MessageID is the _id of the inbound message an event becomes. Deriving it
// from the vendor's key is what makes a retry find the message instead of
// writing a second one, however long after.
func MessageID(workspaceID, channel, key string) string {
	return "msg_in_" + msgapi.HashID("message", workspaceID, channel, key)
}

// AttachmentID is the _id of the record of one file's bytes in a workspace.
func AttachmentID(workspaceID, sha256Hex string) string {
	return "att_" + msgapi.HashID("attachment", workspaceID, sha256Hex)
}

// RedisKey is the fast-path key of an event.
func RedisKey(workspaceID, channel, key string) string {
	return "dedup:" + workspaceID + ":" + channel + ":" + key
}

type result struct {
	duplicate bool
	messageID string
}

// record turns an event into its inbound message exactly once.
//
// Order matters: lead, conversation, attachment owners, message, completion
// record, Redis key. Each step finds what an earlier, interrupted delivery
// of the same event wrote (by _id), so re-running the whole list is always
// safe; the message insert decides which concurrent delivery "received" the
// event; the completion record, last, lets later deliveries stop after one
// read; the Redis key, after it, lets them stop before any.
func (h *Handler) record(ctx context.Context, wsID string, ev event) (result, error) {
	msgID := MessageID(wsID, ev.channel, ev.key)
	log := zerolog.Ctx(ctx).With().Str("key", ev.key).Str("messageId", msgID).Logger()
	rkey := RedisKey(wsID, ev.channel, ev.key)
	dup := result{duplicate: true, messageID: msgID}

	if h.redis != nil {
		seen, err := h.fastSeen(ctx, rkey)
		switch {
		case err != nil:
			log.Warn().Err(err).Str("event", events.InboundFastpathError).Str("op", "get").Msg("redis fast path unavailable; MongoDB decides")
		case seen:
			log.Info().Str("event", events.InboundDuplicate).Str("layer", LayerFastpath).Msg("inbound duplicate ignored")
			return dup, nil
		}
	}

	eventID := EventID(wsID, ev.channel, ev.key)
	done, err := h.completed(ctx, eventID)
	if err != nil {
		return result{}, err
	}
	if done {
		log.Info().Str("event", events.InboundDuplicate).Str("layer", LayerStore).Msg("inbound duplicate ignored")
		h.fastMark(ctx, log, rkey, msgID) // Redis lost it (restart, flush): refill
		return dup, nil
	}

	lead, created, err := h.msgs.FindOrCreateLead(ctx, wsID, ev.phone, ev.email, messages.CRMRefs{})
	if err != nil {
		return result{}, err
	}
	convID, err := h.msgs.EnsureConversation(ctx, wsID, lead.ID, ev.phone, ev.email, created)
	if err != nil {
		return result{}, err
	}
	files, dups, err := h.recordAttachments(ctx, wsID, msgID, ev.files)
	if err != nil {
		return result{}, err
	}

	m := messages.Message{
		ID: msgID, WorkspaceID: wsID, LeadID: lead.ID, ConversationID: convID,
		Channel: ev.medium, Direction: DirectionInbound, Status: StatusReceived,
		Body: ev.text, Subject: ev.subject, Attachments: ev.media,
		Provider: ev.channel, ProviderMessageID: ev.providerID,
		Metadata: metadata(ev, files),
	}
	err = h.msgs.Insert(ctx, &m)
	received := err == nil
	switch {
	case received:
		log.Info().Str("event", events.InboundReceived).Str("leadId", lead.ID).Str("conversationId", convID).
			Int("attachments", len(ev.files)).Msg("inbound message recorded")
		for _, d := range dups {
			log.Info().Str("event", events.InboundContentDuplicate).Str("sha256", d.SHA256).
				Str("earlierMessageId", d.MessageID).Msg("attachment already processed in this workspace; not processed again")
		}
	case store.IsDuplicateKey(err), errors.Is(err, messages.ErrFenced):
		// A concurrent or interrupted delivery of this event wrote it
		// (Insert reports any existing _id as ErrFenced; an inbound
		// message id is never fenced, so here it is the earlier delivery).
	default:
		return result{}, err
	}
	// The listing index, after the message exists. A failure is returned:
	// the vendor's retry finds the message and indexes it then (once).
	if received {
		err = h.msgs.Index(ctx, &m, created)
	} else {
		err = h.msgs.IndexOnce(ctx, m.ID)
	}
	if err != nil {
		return result{}, err
	}

	if h.onMessage != nil {
		if err := h.onMessage(ctx, m); err != nil {
			return result{}, err
		}
	}

	if h.onReply != nil && ev.channel == ChannelTwilio && ev.phone != "" {
		if err := h.onReply(ctx, Reply{WorkspaceID: wsID, MessageID: msgID, Channel: ev.medium, Phone: ev.phone, Text: ev.text}); err != nil {
			return result{}, err
		}
	}

	if h.afterMessage != nil {
		if err := h.afterMessage(); err != nil {
			return result{}, err
		}
	}

	now := h.now().UTC().Truncate(time.Millisecond)
	completedHere, err := h.complete(ctx, eventRecord{
		ID: eventID, WorkspaceID: wsID, Channel: ev.channel, Key: ev.key, MessageID: msgID,
		Duplicates: dups, CreatedAt: now, ExpiresAt: now.Add(KeyTTL),
	})
	if err != nil {
		return result{}, err
	}
	h.fastMark(ctx, log, rkey, msgID)
	if !received {
		log.Info().Str("event", events.InboundDuplicate).Str("layer", LayerStore).Bool("completedHere", completedHere).
			Msg("inbound duplicate: the message already existed")
		return dup, nil
	}
	return result{messageID: msgID}, nil
}

// completed reports whether the event's completion record exists and has
// not expired. An expired record is absent, whether or not it was purged.
func (h *Handler) completed(ctx context.Context, id string) (bool, error) {
	var rec eventRecord
	err := h.events.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&rec)
	switch {
	case store.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, msgapi.Unavailable(fmt.Errorf("read inbound event %s: %w", id, err))
	}
	return rec.ExpiresAt.After(h.now()), nil
}

// complete inserts the completion record and reports whether this call
// wrote it. A duplicate key means another delivery completed the event —
// unless the record there has expired (the reaper has not run yet), in
// which case it is rewritten. That rewrite is not a race decision: every
// writer writes the same fact (event → message), so any of them may win.
func (h *Handler) complete(ctx context.Context, rec eventRecord) (bool, error) {
	_, err := h.events.InsertOne(ctx, rec)
	if err == nil {
		return true, nil
	}
	if !store.IsDuplicateKey(err) {
		return false, msgapi.Unavailable(fmt.Errorf("record inbound event %s: %w", rec.ID, err))
	}
	live, err := h.completed(ctx, rec.ID)
	if err != nil || live {
		return false, err
	}
	if _, err := h.events.ReplaceOne(ctx, bson.D{{Key: "_id", Value: rec.ID}}, rec); err != nil {
		return false, msgapi.Unavailable(fmt.Errorf("renew inbound event %s: %w", rec.ID, err))
	}
	return true, nil
}

// fileInfo describes one payload file on its message.
type fileInfo struct {
	name, contentType string
	size              int
	sha256            string
	duplicateOf       string // the earlier message that owns these bytes
}

// recordAttachments hashes each file and claims its (workspace, hash) for
// msgID with a unique insert. Losing the insert to another message means
// the bytes were processed already: the file is marked as a duplicate of
// that message. Finding msgID itself as the owner means an interrupted
// delivery of this very event claimed it: not a duplicate.
func (h *Handler) recordAttachments(ctx context.Context, wsID, msgID string, files []file) ([]fileInfo, []dupOf, error) {
	var (
		out  []fileInfo
		dups []dupOf
	)
	seen := map[string]string{} // the same bytes twice in one event
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		hx := hex.EncodeToString(sum[:])
		fi := fileInfo{name: f.name, contentType: f.contentType, size: len(f.data), sha256: hx}
		if _, ok := seen[hx]; ok {
			out = append(out, fi)
			continue
		}
		owner, err := h.claimAttachment(ctx, attachmentRecord{
			ID: AttachmentID(wsID, hx), WorkspaceID: wsID, SHA256: hx, Size: len(f.data),
			ContentType: f.contentType, MessageID: msgID, CreatedAt: h.now().UTC().Truncate(time.Millisecond),
		})
		if err != nil {
			return nil, nil, err
		}
		seen[hx] = owner
		if owner != msgID {
			fi.duplicateOf = owner
			dups = append(dups, dupOf{SHA256: hx, MessageID: owner})
		}
		out = append(out, fi)
	}
	return out, dups, nil
}

// claimAttachment inserts rec and returns the id of the message that owns
// the bytes: rec.MessageID when the insert won, else the earlier owner.
func (h *Handler) claimAttachment(ctx context.Context, rec attachmentRecord) (string, error) {
	_, err := h.atts.InsertOne(ctx, rec)
	if err == nil {
		return rec.MessageID, nil
	}
	if !store.IsDuplicateKey(err) {
		return "", msgapi.Unavailable(fmt.Errorf("record attachment %s: %w", rec.ID, err))
	}
	var have attachmentRecord
	if err := h.atts.FindOne(ctx, bson.D{{Key: "_id", Value: rec.ID}}).Decode(&have); err != nil {
		return "", msgapi.Unavailable(fmt.Errorf("read attachment %s: %w", rec.ID, err))
	}
	return have.MessageID, nil
}

// metadata is what the message carries about its delivery. The vendor's
// addresses are kept as given; the lead holds the normalised one.
func metadata(ev event, files []fileInfo) map[string]any {
	in := map[string]any{"channel": ev.channel, "key": ev.key}
	if ev.from != "" {
		in["from"] = ev.from
	}
	if ev.to != "" {
		in["to"] = ev.to
	}
	md := map[string]any{"inbound": in}
	if len(files) > 0 {
		list := make([]any, len(files))
		for i, f := range files {
			d := map[string]any{"filename": f.name, "contentType": f.contentType, "size": int64(f.size), "sha256": f.sha256}
			if f.duplicateOf != "" {
				d["duplicateOf"] = f.duplicateOf
			}
			list[i] = d
		}
		md["files"] = list
	}
	if len(ev.platformFiles) > 0 {
		list := make([]any, len(ev.platformFiles))
		for i, f := range ev.platformFiles {
			list[i] = f
		}
		md["platformFiles"] = list
	}
	return md
}

// fastSeen asks Redis whether the event is completed. Its key exists only
// after the completion record does, so "yes" can be trusted and "no" is
// only a hint.
func (h *Handler) fastSeen(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	err := h.redis.Get(ctx, key).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, err
}

// fastMark sets the Redis key of a completed event (SET NX EX 86400). A
// failure costs later duplicates one MongoDB read, nothing more.
func (h *Handler) fastMark(ctx context.Context, log zerolog.Logger, key, msgID string) {
	if h.redis == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if err := h.redis.SetNX(ctx, key, msgID, KeyTTL).Err(); err != nil {
		log.Warn().Err(err).Str("event", events.InboundFastpathError).Str("op", "set").Msg("redis fast path not updated")
	}
}
