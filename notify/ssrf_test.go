package notify

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/egress"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/store/storetest"
)

// Endpoint creation refuses URLs whose host is an address (or a localhost
// name) msgapi never connects to, and URLs that are not ASCII; each answer
// names the url field.
func TestEndpointURLRefusesInside(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	for _, u := range []string{
		"http://127.0.0.1:9/x", "http://localhost:9/x", "http://localhost.:9/x", "https://localhost./x",
		"https://169.254.169.254/latest/meta-data/", "https://10.0.0.1/x", "https://192.168.1.1/x", "https://[::]/x",
		"https://[::1]/x", "https://[::ffff:127.0.0.1]/x", "https://[64:ff9b::7f00:1]/x", "https://[fd00:ec2::254]/x",
		"https://100.64.0.1/x", "https://0.0.0.0/x", "https://127.1/x", "https://[fe80::1%25eth0]/x",
		"https://hooks.example.com/\xff\xfe", "https://hooks.example.com/\uFFFD", "https://hooks.example.com/a\x00b",
	} {
		_, err := ob.CreateEndpoint(ctx, "ws_a", EndpointInput{URL: u})
		var me *msgapi.Error
		if !asError(err, &me) || len(me.Fields) != 1 || me.Fields[0].Field != "url" {
			t.Errorf("CreateEndpoint(%q): %v, want 400 naming url", u, err)
		}
	}
}

func asError(err error, me **msgapi.Error) bool {
	e, ok := err.(*msgapi.Error)
	*me = e
	return ok
}

// A delivery to an endpoint whose stored URL points inside (written before
// this check existed) is refused at connect time: the far side hears
// nothing and the workspace sees "blocked", not a dial error.
func TestDeliveryToInsideIsBlocked(t *testing.T) {
	st := storetest.New(t, Collections...)
	far := newEndpoint(t, func(int) int { return http.StatusOK })
	ob := run(t, st, Options{Egress: egress.New(egress.Options{})})
	ctx := context.Background()
	ep := Endpoint{ID: "we_inside", WorkspaceID: "ws_a", URL: far.srv.URL + "/admin", Secret: stdwebhook.NewSecret(), CreatedAt: time.Now(), EventTypes: []string{}}
	if _, err := st.Collection(collEndpoints).InsertOne(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	id := EventID("ws_a", TypeMessageSent, "msg_1")
	waitFor(t, "the first attempt's result", func() bool {
		v, _ := ob.GetEvent(ctx, "ws_a", id)
		return len(v.Attempts) > 0 && v.Attempts[0].Status == "failed"
	})
	v, _ := ob.GetEvent(ctx, "ws_a", id)
	a := v.Attempts[0]
	if a.Error == nil || *a.Error != "blocked" || a.ResponseBody != nil || a.StatusCode != nil {
		t.Errorf("attempt error %v body %v code %v, want blocked with no body or code", deref(a.Error), a.ResponseBody, a.StatusCode)
	}
	if n := len(far.got()); n != 0 {
		t.Errorf("the inside endpoint got %d requests, want 0", n)
	}
}

// A public-looking name that resolves to loopback is refused when dialled.
func TestDeliveryToNameResolvingInsideIsBlocked(t *testing.T) {
	st := storetest.New(t, Collections...)
	far := newEndpoint(t, func(int) int { return http.StatusOK })
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ob := run(t, st, Options{AllowHTTP: true, Egress: egress.New(egress.Options{Lookup: lookup})})
	ctx := context.Background()
	mustEndpoint(t, ob, "ws_a", strings.Replace(far.srv.URL, "127.0.0.1", "hooks.example.com", 1))
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	id := EventID("ws_a", TypeMessageSent, "msg_1")
	waitFor(t, "the first attempt's result", func() bool {
		v, _ := ob.GetEvent(ctx, "ws_a", id)
		return len(v.Attempts) > 0 && v.Attempts[0].Status == "failed"
	})
	v, _ := ob.GetEvent(ctx, "ws_a", id)
	if e := deref(v.Attempts[0].Error); e != "blocked" {
		t.Errorf("attempt error %q, want blocked", e)
	}
	if n := len(far.got()); n != 0 {
		t.Errorf("the inside endpoint got %d requests, want 0", n)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A workspace sees a classified error, never the raw dial error (which
// names addresses and ports: a scanner's answer).
func TestDeliveryErrorClassified(t *testing.T) {
	st := storetest.New(t, Collections...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/x"
	ln.Close()
	ob := run(t, st, Options{})
	mustEndpoint(t, ob, "ws_a", closed)
	ctx := context.Background()
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	id := EventID("ws_a", TypeMessageSent, "msg_1")
	waitFor(t, "the first attempt's result", func() bool {
		v, _ := ob.GetEvent(ctx, "ws_a", id)
		return len(v.Attempts) > 0 && v.Attempts[0].Status == "failed"
	})
	v, _ := ob.GetEvent(ctx, "ws_a", id)
	if e := deref(v.Attempts[0].Error); e != "refused" || strings.Contains(e, "127.0.0.1") {
		t.Errorf("attempt error %q, want refused", e)
	}
}
