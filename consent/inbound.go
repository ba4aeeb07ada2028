package consent

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
)

// Inbound is a text a person sent from a phone.
type Inbound struct {
	WorkspaceID string
	MessageID   string // the inbound message: the evidence, and the reply's once-key
	Channel     string // sms, whatsapp
	Phone       string // E.164
	Text        string
}

// KeywordOptions configure Keywords.
type KeywordOptions struct {
	Store *Store
	// ReplyText returns the workspace's confirmation text for an opt-out
	// ("" sends none: the default, for providers that reply themselves,
	// as Twilio does on its numbers).
	ReplyText func(ctx context.Context, workspaceID string) (string, error)
	// Reply sends the confirmation through the channel's sender and says
	// what happened (a sender status); nil sends nothing.
	Reply func(ctx context.Context, in Inbound, text string) (status, errText string)
	// OnKeyword, optional, counts a matched keyword (metrics).
	OnKeyword func(k Keyword)
}

// Keywords applies inbound opt-out and opt-in keywords to the list.
type Keywords struct{ o KeywordOptions }

// NewKeywords returns Keywords.
func NewKeywords(o KeywordOptions) *Keywords { return &Keywords{o: o} }

// Handle matches in.Text and records what it asks for. It is safe to run
// again for the same inbound message (a vendor redelivery before the event
// was completed): the suppression records once, and the confirmation is
// claimed by an insert keyed on the inbound message, so it goes out at
// most once however often Handle runs.
func (k *Keywords) Handle(ctx context.Context, in Inbound) error {
	kind, word := Match(in.Text)
	if kind == None {
		return nil
	}
	if k.o.OnKeyword != nil {
		k.o.OnKeyword(kind)
	}
	ev := Evidence{MessageID: in.MessageID, Channel: in.Channel, Keyword: word}
	log := zerolog.Ctx(ctx)
	switch kind {
	case OptIn:
		_, err := k.o.Store.Lift(ctx, in.WorkspaceID, in.Phone, SourceKeyword, ev)
		return err
	case HelpMsg:
		log.Info().Str("event", events.ConsentHelp).Str("workspaceId", in.WorkspaceID).Str("messageId", in.MessageID).
			Str("keyword", word).Msg("inbound HELP recorded")
		return nil
	}
	if _, _, err := k.o.Store.Suppress(ctx, in.WorkspaceID, in.Phone, SourceKeyword, ev); err != nil {
		return err
	}
	if k.o.ReplyText == nil || k.o.Reply == nil {
		return nil
	}
	text, err := k.o.ReplyText(ctx, in.WorkspaceID)
	if err != nil || text == "" {
		return err
	}
	won, err := k.o.Store.ClaimReply(ctx, in.WorkspaceID, in.MessageID)
	if err != nil || !won {
		return err
	}
	// The claim is taken before the call: a crash after it loses the
	// confirmation rather than sending it twice.
	status, errText := k.o.Reply(context.WithoutCancel(ctx), in, text)
	ev2 := log.Info().Str("event", events.ConsentReplySent)
	if status != "sent" {
		ev2 = log.Warn().Str("event", events.ConsentReplyFailed).Str("error", errText)
	}
	ev2.Str("workspaceId", in.WorkspaceID).Str("messageId", in.MessageID).Str("status", status).Msg("opt-out confirmation reply")
	return nil
}
