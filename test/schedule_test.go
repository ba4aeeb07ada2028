package test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// timedReceiver is the webhook provider's far side: it checks each
// delivery's signature and keeps every arrival time per message id.
type timedReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	at  map[string][]time.Time
	bad atomic.Int64
}

func newTimedReceiver(t *testing.T, secret string) *timedReceiver {
	r := &timedReceiver{at: map[string][]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(req.Body)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		if req.Header.Get("X-Msgapi-Signature") != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			r.bad.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		id := req.Header.Get("Idempotency-Key")
		r.at[id] = append(r.at[id], now)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"relay-`+id+`"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *timedReceiver) arrivals(id string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at[id]...)
}

// scheduleCluster runs two msgapi processes on one embedded store (a hosts
// the engine, b attaches), sending sms through the webhook provider to rcv.
func scheduleCluster(t *testing.T, rcv *timedReceiver, secret string) (a, b *proc, envA, envB map[string]string) {
	env := embeddedEnv(t, t.TempDir())
	for k, v := range map[string]string{"MSGAPI_SENDER_SMS": "webhook", "MSGAPI_WEBHOOK_URL": rcv.srv.URL, "MSGAPI_WEBHOOK_SECRET": secret,
		"MSGAPI_LOG_LEVEL": "warn", "MSGAPI_KEY_CACHE_TTL": "0s",
		// Hundreds of acceptances as fast as they go: not a rate-limit test
		// (the per-workspace default, 20 a second, would answer 429).
		"MSGAPI_RATE_LIMIT": "0"} {
		env[k] = v
	}
	a = startBinary(t, plainBinary(t), env)
	envA = env
	envB = map[string]string{"MONGODB_URI": engineURI(env)}
	for k, v := range env {
		if k != "MSGAPI_DATA_DIR" {
			envB[k] = v
		}
	}
	b = startBinary(t, plainBinary(t), envB)
	return a, b, envA, envB
}

func schedule(t *testing.T, p *proc, key, to, body string, at time.Time, extra map[string]any) (id string, ans map[string]any) {
	t.Helper()
	in := map[string]any{"channel": "sms", "recipientPhone": to, "body": body, "sendAt": at.Format(time.RFC3339Nano)}
	for k, v := range extra {
		in[k] = v
	}
	raw, _ := json.Marshal(in)
	// A pending answer is retried as a CRM retries it: under -race on two
	// cores a message insert can time out after landing, and its request
	// answers "pending" (its message is marked not sent; README,
	// Exactly once).
	for attempt := 1; ; attempt++ {
		r := p.do(http.MethodPost, "/api/messages", key, string(raw))
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Errorf("schedule %s: %d %s", to, r.status, r.body)
			return "", nil
		}
		ans = r.json(t)
		if ans["pending"] != true || attempt == 5 {
			break
		}
		time.Sleep(time.Second)
	}
	m, _ := ans["message"].(map[string]any)
	if ans["status"] != "scheduled" || m["status"] != "scheduled" || m["sendAt"] == nil {
		t.Errorf("schedule %s: answer status %v, message status %v, sendAt %v; want scheduled with its sendAt", to, ans["status"], m["status"], m["sendAt"])
	}
	id, _ = m["id"].(string)
	return id, ans
}

func messageStatus(t *testing.T, p *proc, key, id string) (string, map[string]any) {
	t.Helper()
	r := p.do(http.MethodGet, "/api/messages/"+id, key, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, r.status, r.body)
	}
	m := r.json(t)["message"].(map[string]any)
	return m["status"].(string), m
}

// waitFinal polls until every id has left scheduled and sending, or the
// deadline passes.
func waitFinal(t *testing.T, p *proc, key string, ids []string, within time.Duration) map[string]string {
	t.Helper()
	out := map[string]string{}
	deadline := time.Now().Add(within)
	for {
		pending := 0
		for _, id := range ids {
			if st := out[id]; st != "" && st != "scheduled" && st != "sending" {
				continue
			}
			st, _ := messageStatus(t, p, key, id)
			out[id] = st
			if st == "scheduled" || st == "sending" {
				pending++
			}
		}
		if pending == 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages still scheduled or sending after %s", pending, len(ids), within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Scheduled sends against the real binary, two processes on one store,
// every delivery counted where it lands (the webhook provider's receiver).
func TestScheduledSends(t *testing.T) {
	const secret = "schedule-relay-secret"
	rcv := newTimedReceiver(t, secret)
	a, b, envA, envB := scheduleCluster(t, rcv, secret)
	_, key := a.createWorkspace(admin)
	top := t

	t.Run("fifty messages across two processes, one SIGKILLed and restarted, each once on time", func(t *testing.T) {
		const n = 50
		base := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
		ids := make([]string, n)
		sendAt := make([]time.Time, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := a
				if i%2 == 1 {
					p = b
				}
				sendAt[i] = base.Add(time.Duration(i%3) * time.Second) // 3 to 5 s ahead
				ids[i], _ = schedule(t, p, key, fmt.Sprintf("+1555020%04d", i), fmt.Sprintf("Reminder %d: your visit is tomorrow", i), sendAt[i], nil)
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		// b accepted half of them; it dies before any is due and comes back
		// while they are going out.
		if time.Now().After(base) {
			t.Fatalf("accepting %d messages took past the first one's time; the kill below would not be before it", n)
		}
		if err := b.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-b.done
		time.Sleep(time.Until(base.Add(1500 * time.Millisecond))) // back while they go out
		b = startBinary(top, plainBinary(top), envB)              // lives on for the next subtests

		waitFinal(t, a, key, ids, 30*time.Second)
		time.Sleep(2 * time.Second) // a late second delivery would land by now
		for i, id := range ids {
			got := rcv.arrivals(id)
			if len(got) != 1 {
				t.Errorf("message %d (%s) delivered %d times, want 1", i, id, len(got))
				continue
			}
			if early := sendAt[i].Sub(got[0]); early > 0 {
				t.Errorf("message %d delivered %s before its time", i, early)
			}
			if late := got[0].Sub(sendAt[i]); late > 5*time.Second {
				t.Errorf("message %d delivered %s after its time, want within 5 s", i, late)
			}
			if st, _ := messageStatus(t, b, key, id); st != "sent" {
				t.Errorf("message %d is %s, want sent", i, st)
			}
		}
		if rcv.bad.Load() != 0 {
			t.Errorf("%d deliveries badly signed", rcv.bad.Load())
		}
	})

	t.Run("a cancel racing the due time: exactly one of sent and canceled, 200 times", func(t *testing.T) {
		const n = 200
		// 200 acceptances take about 3 s; the race needs every message
		// accepted before its time.
		due := time.Now().Add(8 * time.Second).Truncate(time.Millisecond)
		ids := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				p := []*proc{a, b}[i%2]
				ids[i], _ = schedule(t, p, key, fmt.Sprintf("+1555030%04d", i), fmt.Sprintf("Race %d", i), due, nil)
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if time.Now().After(due.Add(-time.Second)) {
			t.Fatalf("accepting %d messages took until %s before their time; the race below needs them all accepted first", n, time.Until(due))
		}
		// The cancels spread from just before the due time to past the
		// other process's delay, each through either process.
		codes := make([]int, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(due.Add(time.Duration(i%25)*120*time.Millisecond - 300*time.Millisecond)))
				p := []*proc{b, a}[i%2]
				r := p.do(http.MethodPost, "/api/messages/"+ids[i]+"/cancel", key, "")
				codes[i] = r.status
				switch r.status {
				case http.StatusOK:
					if st := r.json(t)["message"].(map[string]any)["status"]; st != "canceled" {
						t.Errorf("cancel %d: 200 with status %v", i, st)
					}
				case http.StatusConflict:
					pb := r.json(t)
					if pb["code"] != "message_not_cancelable" || pb["message"] == nil || r.header.Get("Content-Type") != "application/problem+json" {
						t.Errorf("cancel %d: 409 %s", i, r.body)
					}
				default:
					t.Errorf("cancel %d: %d %s", i, r.status, r.body)
				}
			}()
		}
		wg.Wait()
		final := waitFinal(t, a, key, ids, 30*time.Second)
		time.Sleep(2 * time.Second)
		sent, canceled := 0, 0
		for i, id := range ids {
			got := len(rcv.arrivals(id))
			switch {
			case codes[i] == http.StatusOK && final[id] == "canceled" && got == 0:
				canceled++
			case codes[i] == http.StatusConflict && final[id] == "sent" && got == 1:
				sent++
			default:
				t.Errorf("message %d: cancel answered %d, status %s, %d deliveries: want 200/canceled/0 or 409/sent/1", i, codes[i], final[id], got)
			}
		}
		t.Logf("%d sent, %d canceled", sent, canceled)
	})

	t.Run("a cancellation key cancels every message given it, and only those", func(t *testing.T) {
		at := time.Now().Add(3 * time.Second)
		var booked []string
		for i := range 3 {
			id, _ := schedule(t, []*proc{a, b}[i%2], key, "+15550400001", fmt.Sprintf("Booking 42 reminder %d", i), at, map[string]any{"cancellationKey": "booking-42"})
			booked = append(booked, id)
		}
		other, _ := schedule(t, a, key, "+15550400001", "Booking 43 reminder", at, map[string]any{"cancellationKey": "booking-43"})
		plain, _ := schedule(t, b, key, "+15550400001", "A reminder without a key", at, nil)

		r := b.do(http.MethodPost, "/api/messages/cancel", key, `{"cancellationKey":"booking-42"}`)
		if r.status != http.StatusOK {
			t.Fatalf("cancel by key: %d %s", r.status, r.body)
		}
		got := r.json(t)
		if c, nc := got["canceled"].([]any), got["notCanceled"].([]any); len(c) != 3 || len(nc) != 0 {
			t.Fatalf("cancel by key: %d canceled, %d not, want 3 and 0: %s", len(c), len(nc), r.body)
		}
		// Again: the same three, already canceled.
		if r := a.do(http.MethodPost, "/api/messages/cancel", key, `{"cancellationKey":"booking-42"}`); r.status != http.StatusOK || len(r.json(t)["canceled"].([]any)) != 3 {
			t.Errorf("cancel by key again: %d %s", r.status, r.body)
		}
		final := waitFinal(t, a, key, append(append([]string{}, booked...), other, plain), 15*time.Second)
		time.Sleep(time.Second)
		for _, id := range booked {
			if final[id] != "canceled" || len(rcv.arrivals(id)) != 0 {
				t.Errorf("booking-42 message %s: %s, %d deliveries; want canceled, none", id, final[id], len(rcv.arrivals(id)))
			}
		}
		for _, id := range []string{other, plain} {
			if final[id] != "sent" || len(rcv.arrivals(id)) != 1 {
				t.Errorf("message %s: %s, %d deliveries; want sent once", id, final[id], len(rcv.arrivals(id)))
			}
		}
		// A cancel after the send: 409 with the message as it is.
		r = a.do(http.MethodPost, "/api/messages/"+plain+"/cancel", key, "")
		if r.status != http.StatusConflict || r.json(t)["message"].(map[string]any)["status"] != "sent" {
			t.Errorf("cancel after the send: %d %s", r.status, r.body)
		}
		// Another workspace cannot cancel, or even see, these.
		_, otherKey := a.createWorkspace(admin)
		if r := a.do(http.MethodPost, "/api/messages/"+booked[0]+"/cancel", otherKey, ""); r.status != http.StatusNotFound {
			t.Errorf("another workspace's cancel: %d %s", r.status, r.body)
		}
	})

	t.Run("a recipient who opts out before the time is suppressed, never sent", func(t *testing.T) {
		const to = "+15550500001"
		id, _ := schedule(t, a, key, to, "See you at 9", time.Now().Add(2*time.Second), nil)
		if r := b.do(http.MethodPost, "/api/suppressions", key, `{"address":"`+to+`","reason":"asked by phone"}`); r.status != http.StatusCreated {
			t.Fatalf("suppress: %d %s", r.status, r.body)
		}
		final := waitFinal(t, b, key, []string{id}, 15*time.Second)
		_, m := messageStatus(t, a, key, id)
		if final[id] != "suppressed" || m["errorCode"] != "recipient_opted_out" || len(rcv.arrivals(id)) != 0 {
			t.Errorf("opted out before its time: %s (%v), %d deliveries; want suppressed, none", final[id], m["errorCode"], len(rcv.arrivals(id)))
		}
	})

	t.Run("a disabled workspace's scheduled message is refused at its time", func(t *testing.T) {
		wsID, wsKey := a.createWorkspace(admin)
		id, _ := schedule(t, b, wsKey, "+15550600001", "Your order shipped", time.Now().Add(2*time.Second), nil)
		if r := a.do(http.MethodPost, "/admin/workspaces/"+wsID+"/disable", admin, ""); r.status != http.StatusOK {
			t.Fatalf("disable: %d %s", r.status, r.body)
		}
		time.Sleep(5 * time.Second)
		if r := a.do(http.MethodPost, "/admin/workspaces/"+wsID+"/enable", admin, ""); r.status != http.StatusOK {
			t.Fatalf("enable: %d %s", r.status, r.body)
		}
		final := waitFinal(t, a, wsKey, []string{id}, 10*time.Second)
		_, m := messageStatus(t, a, wsKey, id)
		if final[id] != "failed" || m["errorCode"] != "workspace_disabled" || len(rcv.arrivals(id)) != 0 {
			t.Errorf("disabled before its time: %s (%v), %d deliveries; want failed, none", final[id], m["errorCode"], len(rcv.arrivals(id)))
		}
	})

	t.Run("retries answer the scheduled original; bad times are 400", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		body := `{"channel":"sms","recipientPhone":"+15550700001","body":"Tomorrow at 9","sendAt":"` + at.Format(time.RFC3339) + `"}`
		first := a.do(http.MethodPost, "/api/messages", key, body)
		again := b.do(http.MethodPost, "/api/messages", key, body)
		if first.status != http.StatusCreated || again.status != http.StatusOK {
			t.Fatalf("schedule then retry: %d, %d", first.status, again.status)
		}
		f, g := first.json(t), again.json(t)
		fm, gm := f["message"].(map[string]any), g["message"].(map[string]any)
		if g["duplicateOnly"] != true || g["status"] != "scheduled" || gm["id"] != fm["id"] || fm["sendAt"] != at.Format(time.RFC3339) {
			t.Errorf("retry of a scheduled send: %s after %s", again.body, first.body)
		}
		for _, tc := range []struct{ sendAt, want string }{
			{"tomorrow at 9", "RFC 3339"},
			{time.Now().Add(40 * 24 * time.Hour).Format(time.RFC3339), "at most 35 days"},
			{time.Now().Add(-time.Hour).Format(time.RFC3339), "in the past"},
		} {
			r := a.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550700002","body":"x","sendAt":"`+tc.sendAt+`"}`)
			if r.status != http.StatusBadRequest || !json.Valid(r.body) || !strings.Contains(string(r.body), `"field":"sendAt"`) || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("sendAt %q: %d %s", tc.sendAt, r.status, r.body)
			}
		}
		if rcv.arrivals(fm["id"].(string)) != nil {
			t.Errorf("a message scheduled an hour ahead was delivered")
		}
	})

	t.Run("quiet hours in the recipient's time zone: defer, refuse, ignore", func(t *testing.T) {
		wsID, wsKey := a.createWorkspace(admin)
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		now := time.Now().In(tokyo).Truncate(time.Minute)
		// A window around the present minute in Tokyo; New York's present
		// (14 hours behind) is outside it, and so is the workspace's UTC.
		start, end := now.Add(-time.Hour), now.Add(2*time.Hour)
		setQuiet := func(mode string) {
			t.Helper()
			body := fmt.Sprintf(`{"quietHours":{"start":%q,"end":%q,"mode":%q,"timeZone":"UTC"}}`, start.Format("15:04"), end.Format("15:04"), mode)
			if mode == "" {
				body = `{"quietHours":null}`
			}
			if r := a.do(http.MethodPatch, "/admin/workspaces/"+wsID, admin, body); r.status != http.StatusOK {
				t.Fatalf("quiet hours %s: %d %s", mode, r.status, r.body)
			}
		}
		send := func(p *proc, to, text string, extra string) reply {
			return p.do(http.MethodPost, "/api/messages", wsKey, `{"channel":"sms","recipientPhone":"`+to+`","body":"`+text+`"`+extra+`}`)
		}
		const japan, newYork = "+81312345678", "+12125550100"

		setQuiet("defer")
		r := send(b, japan, "Your parcel arrives today", "")
		m, _ := r.json(t)["message"].(map[string]any)
		if r.status != http.StatusCreated || m["status"] != "scheduled" || m["sendAt"] != end.UTC().Format(time.RFC3339) {
			t.Errorf("defer, Tokyo inside its window: %d status %v sendAt %v, want scheduled at %s", r.status, m["status"], m["sendAt"], end.UTC().Format(time.RFC3339))
		}
		if r := send(a, newYork, "Your parcel arrives today", ""); r.status != http.StatusCreated || r.json(t)["status"] != "sent" {
			t.Errorf("defer, New York outside the window: %d %s", r.status, r.body)
		}
		if r := send(a, japan, "Your one-time code is 4711", `,"ignoreQuietHours":true`); r.status != http.StatusOK || r.json(t)["status"] != "sent" {
			t.Errorf("ignoreQuietHours inside the window: %d %s", r.status, r.body)
		}

		setQuiet("refuse")
		req, _ := http.NewRequest(http.MethodPost, b.url+"/api/messages", strings.NewReader(`{"channel":"sms","recipientPhone":"`+japan+`","body":"Refused at night"}`))
		req.Header.Set("Authorization", "Bearer "+wsKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "quiet-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		retry, _ := time.ParseDuration(res.Header.Get("Retry-After") + "s")
		if want := time.Until(end); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"quiet_hours"`) ||
			retry < want-time.Minute || retry > want+time.Minute {
			t.Errorf("refuse: %d Retry-After %s (want about %s) %s", res.StatusCode, retry, want.Round(time.Second), body)
		}
		if r := a.do(http.MethodPatch, "/admin/workspaces/"+wsID, admin, `{"refusedStatus":422}`); r.status != http.StatusOK {
			t.Fatal(r.status)
		}
		if r := send(a, japan, "Refused with the profile's status", ""); r.status != http.StatusUnprocessableEntity {
			t.Errorf("refuse under refusedStatus 422: %d %s", r.status, r.body)
		}
		// The refusal used nothing up: the same keyed request goes through
		// once the window is lifted.
		setQuiet("")
		req, _ = http.NewRequest(http.MethodPost, a.url+"/api/messages", strings.NewReader(`{"channel":"sms","recipientPhone":"`+japan+`","body":"Refused at night"}`))
		req.Header.Set("Authorization", "Bearer "+wsKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "quiet-1")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 || !strings.Contains(string(body), `"status":"sent"`) {
			t.Errorf("the refused key after the window: %d %s", res.StatusCode, body)
		}
	})

	// Last: it takes the whole cluster down.
	t.Run("every process SIGKILLed, the engine host included, before the messages are due: sent once after the restart", func(t *testing.T) {
		due := time.Now().Add(3 * time.Second)
		var ids []string
		for i := range 10 {
			id, _ := schedule(t, []*proc{a, b}[i%2], key, fmt.Sprintf("+1555060%04d", i), fmt.Sprintf("Through an outage %d", i), due, nil)
			ids = append(ids, id)
		}
		for _, p := range []*proc{b, a} {
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-p.done
		}
		time.Sleep(time.Until(due.Add(2 * time.Second))) // due while nothing runs
		a = startBinary(top, plainBinary(top), envA)
		back := time.Now()
		waitFinal(t, a, key, ids, 30*time.Second)
		time.Sleep(2 * time.Second)
		for i, id := range ids {
			got := rcv.arrivals(id)
			if len(got) != 1 {
				t.Errorf("message %d delivered %d times through the outage, want 1", i, len(got))
				continue
			}
			if got[0].Before(back) || got[0].Sub(back) > 5*time.Second {
				t.Errorf("message %d delivered %s after the restart, want within 5 s", i, got[0].Sub(back))
			}
		}
	})
}
