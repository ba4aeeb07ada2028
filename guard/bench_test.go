package guard_test

import (
	"strings"
	"testing"

	"github.com/msgapi/msgapi/guard"
)

// LockID runs on every send before the lock insert; it should cost nothing
// next to the insert's store round trip.
func BenchmarkLockID(b *testing.B) {
	for _, bc := range []struct {
		name string
		body string
	}{
		{"sms", "Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out."},
		{"sms-1600", strings.Repeat("x", 1600)},
		{"email-64KiB", strings.Repeat("x", 64<<10)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			k := guard.Key{WorkspaceID: "ws_0123456789abcdef", Phone: "+15550100000", Body: bc.body}
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				guard.LockID(k)
			}
		})
	}
}
