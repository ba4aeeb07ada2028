package msgapi_test

import (
	"strings"
	"testing"

	"github.com/msgapi/msgapi"
)

func TestValidID(t *testing.T) {
	for range 100 {
		if id := msgapi.NewID("ws"); !msgapi.ValidID("ws", id) {
			t.Fatalf("ValidID(ws, %q) = false for a NewID", id)
		}
	}
	good := "ws_" + strings.Repeat("a", 13) + strings.Repeat("7", 13)
	tests := []struct {
		prefix, id string
		want       bool
	}{
		{"ws", good, true},
		{"msg", good, false},
		{"ws", "ws_nope", false},
		{"ws", good + "a", false},
		{"ws", good[:len(good)-1], false},
		{"ws", strings.ToUpper(good), false},
		{"ws", good[:len(good)-1] + "1", false}, // not base32
		{"ws", good[:len(good)-1] + "=", false},
		{"ws", "xs" + good[2:], false},
		{"ws", "", false},
		{"ws", "ws_" + strings.Repeat("w", 60_000), false},
	}
	for _, tt := range tests {
		if got := msgapi.ValidID(tt.prefix, tt.id); got != tt.want {
			t.Errorf("ValidID(%q, %.40q) = %v, want %v", tt.prefix, tt.id, got, tt.want)
		}
	}
}
