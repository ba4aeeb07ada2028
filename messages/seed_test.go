package messages

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
)

// seed writes n messages to one lead of a fresh workspace the fast way:
// messages and index documents in batches of many per insert command, built
// by the index writer's own functions (slot reservation, entries, markers),
// so the store holds exactly what n sends would have left. mk may change
// each message before it is written.
func (e *feedEnv) seed(n int, mk func(i int, m *Message)) []Message {
	e.t.Helper()
	ctx := context.Background()
	phone := "+15550100001"
	out := make([]Message, 0, n)
	const batch = 1000
	base := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Duration(n) * time.Millisecond)
	for start := 0; start < n; start += batch {
		var msgs, idx []any
		for i := start; i < min(n, start+batch); i++ {
			m := &Message{ID: msgapi.NewID("msg"), WorkspaceID: e.ws, LeadID: LeadID(e.ws, phone, ""),
				ConversationID: ConversationID(e.ws, phone, ""), Channel: ChannelSMS, Direction: "outbound",
				RecipientPhone: phone, Body: "seeded", Status: StatusSent,
				CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
			m.UpdatedAt = m.CreatedAt
			if mk != nil {
				mk(i, m)
			}
			msgs = append(msgs, *m)
			feeds := [3]string{
				feedKey(m.WorkspaceID, feedWorkspace, m.WorkspaceID),
				feedKey(m.WorkspaceID, feedLead, m.LeadID),
				feedKey(m.WorkspaceID, feedConversation, m.ConversationID),
			}
			idx = append(idx, indexMarker{ID: markerID(m.ID), MessageID: m.ID, CreatedAt: m.CreatedAt})
			for _, f := range feeds {
				slot := e.s.heads.reserve(f)
				e.s.heads.saw(f, slot)
				idx = append(idx, entryFor(m, slotID(f, slot)))
			}
			out = append(out, *m)
		}
		if _, err := e.st.Collection("messages").InsertMany(ctx, msgs, options.InsertMany().SetOrdered(false)); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.s.idx.InsertMany(ctx, idx, options.InsertMany().SetOrdered(false)); err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}
