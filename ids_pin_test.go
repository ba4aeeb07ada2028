package msgapi_test

import (
	"testing"

	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/notify"
)

// The ids derived by hashing are stored as _id: a change of framing would
// orphan every stored lead, conversation, lock, key record, event and
// suppression. These are the ids as stored today.
func TestStoredIDsDoNotChange(t *testing.T) {
	for _, tt := range []struct{ name, got, want string }{
		{"lead by phone", messages.LeadID("ws_1", "+15550100000", ""), "lead_07f9e578196ce1faeacb667bfba19360"},
		{"lead by email", messages.LeadID("ws_1", "", "ann@example.com"), "lead_53ad4cfb13bc416c8b4db17cd0804210"},
		{"conversation", messages.ConversationID("ws_1", "+15550100000", ""), "conv_07f9e578196ce1faeacb667bfba19360"},
		{"dedup lock", guard.LockID(guard.Key{WorkspaceID: "ws_1", Phone: "+15550100000", Email: "ann@example.com", Body: "hi there"}), "822a5bca1a0afa70e49bfd1d1323e2177823dedcb9a51d24433cd48402242570"},
		{"idempotency record", idempotency.RecordID("ws_1", "POST", "/api/messages", "key-1"), "058dd653184f8df7dc57829904d3812a73449f5d41d5c997a4b53a087ff1d137"},
		{"request fingerprint", idempotency.Fingerprint("POST", "/api/messages", []byte(`{"b":1, "a":2}`)), "4a5cd2bd13b8940c27076c9f177053c90ae0c2107120c74d4d8f967d5c100ed8"},
		{"raw fingerprint", idempotency.Fingerprint("POST", "/api/messages", []byte(`not json`)), "a606d623f66ef7d1d12d236cdaff07f40370eeb03cf45a3ff22aae43455d6345"},
		{"workspace event", notify.EventID("ws_1", "message.sent", "msg_1"), "evt_91fb57187d8ed730bf366a88ebfba8a8"},
		{"event delivery", notify.DeliveryID("evt_1", "we_1", 2), "dlv_793f7fc455ecbc70f52224af48391d58"},
		{"inbound event", inbound.EventID("ws_1", "twilio", "SM123"), "ie_3af395cad466f345a1b6927fffb03b01"},
		{"inbound message", inbound.MessageID("ws_1", "twilio", "SM123"), "msg_in_4794602459ae31c32cdb692366832848"},
		{"inbound attachment", inbound.AttachmentID("ws_1", "abc"), "att_1362c46ac9961d9acadf92d9e6245343"},
		{"suppression", consent.ID("ws_1", "+15550100000"), "sup_fce4347d3732aeab1a61c693b57ea59e"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s id = %q, want %q (the stored id)", tt.name, tt.got, tt.want)
		}
	}
}
