package inbound_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi/inbound"
)

// The webhook answers only after the event is recorded, so its latency is
// the vendor's wait (Slack gives up after 3 s). These measure a new event
// and a redelivery over HTTP on the embedded engine, with the store round
// trips each costs.
func BenchmarkDelivery(b *testing.B) {
	for _, bk := range backends {
		b.Run("new/"+bk.name, func(b *testing.B) {
			e := newEnv(b, envOpts{redis: bk.redis(b)})
			rt := e.st.RoundTrips.Total()
			b.ResetTimer()
			for i := range b.N {
				r := e.deliver(delivery{ch: inbound.ChannelTwilio, body: twilioSMS(fmt.Sprintf("SMbench%d", i), fmt.Sprintf("+1415555%04d", i%10000), "hi")})
				if r.status != http.StatusOK {
					b.Fatalf("delivery: %s", r)
				}
			}
			b.ReportMetric(float64(e.st.RoundTrips.Total()-rt)/float64(b.N), "roundtrips/op")
		})
		b.Run("duplicate/"+bk.name, func(b *testing.B) {
			e := newEnv(b, envOpts{redis: bk.redis(b)})
			d := delivery{ch: inbound.ChannelTwilio, body: twilioSMS("SMbenchdup", "+14155550100", "hi")}
			e.deliver(d)
			rt := e.st.RoundTrips.Total()
			b.ResetTimer()
			for range b.N {
				if r := e.deliver(d); r.status != http.StatusOK {
					b.Fatalf("delivery: %s", r)
				}
			}
			b.ReportMetric(float64(e.st.RoundTrips.Total()-rt)/float64(b.N), "roundtrips/op")
		})
	}
}
