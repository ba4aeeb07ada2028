package consent

import (
	"context"
	"sync"
	"testing"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		text string
		want Keyword
	}{
		{"STOP", OptOut}, {"stop", OptOut}, {"  Stop \n", OptOut}, {"\tsToP", OptOut},
		{"STOPALL", OptOut}, {"stop all", OptOut}, {"Unsubscribe", OptOut}, {"cancel", OptOut},
		{"END", OptOut}, {"quit", OptOut}, {"Revoke", OptOut}, {"optout", OptOut},
		{"opt out", OptOut}, {"Opt  Out", OptOut}, {"opt-out", OptOut},
		{"START", OptIn}, {" unstop ", OptIn}, {"Yes", OptIn},
		{"HELP", HelpMsg}, {"info", HelpMsg},
		{"", None}, {"stop texting me", None}, {"STOP.", None}, {"please stop", None},
		{"stopp", None}, {"yes please", None}, {"s t o p", None},
	}
	for _, tt := range tests {
		if got, _ := Match(tt.text); got != tt.want {
			t.Errorf("Match(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	for _, s := range []string{"STOP", " opt out ", "yes", "hello"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, word := Match(s)
		if (k == None) != (word == "") {
			t.Fatalf("Match(%q) = %q, %q", s, k, word)
		}
		if k != None && keywords[word] != k {
			t.Fatalf("Match(%q) word %q is not a keyword of kind %q", s, word, k)
		}
	})
}

func newStore(t *testing.T) (*Store, *[]Change) {
	t.Helper()
	st := storetest.New(t, Collections...)
	var (
		mu      sync.Mutex
		changes []Change
	)
	s := New(Options{Store: st, OnChange: func(_ context.Context, c Change) error {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, c)
		return nil
	}})
	return s, &changes
}

func TestSuppressCheckLift(t *testing.T) {
	ctx := context.Background()
	s, changes := newStore(t)
	const ws, phone = "ws_a", "+15550100000"

	if _, ok, err := s.Check(ctx, ws, phone); err != nil || ok {
		t.Fatalf("Check before = %v, %v; want not suppressed", ok, err)
	}
	ev := Evidence{MessageID: "msg_in_1", Keyword: "STOP", Channel: "sms"}
	sp, changed, err := s.Suppress(ctx, ws, phone, SourceKeyword, ev)
	if err != nil || !changed {
		t.Fatalf("Suppress = %v, %v; want changed", changed, err)
	}
	if sp.Kind != KindPhone || sp.Source != SourceKeyword || sp.Evidence != ev {
		t.Errorf("suppression = %+v", sp)
	}
	got, ok, err := s.Check(ctx, ws, phone)
	if err != nil || !ok || got.Evidence.MessageID != "msg_in_1" {
		t.Fatalf("Check = %+v, %v, %v; want suppressed by msg_in_1", got, ok, err)
	}
	// Another workspace: not suppressed.
	if _, ok, _ := s.Check(ctx, "ws_b", phone); ok {
		t.Error("another workspace sees the suppression")
	}
	// A redelivery, or a second source: the first record stands.
	if _, changed, _ := s.Suppress(ctx, ws, phone, SourceKeyword, ev); changed {
		t.Error("a repeated STOP changed the list")
	}
	if _, changed, _ := s.Suppress(ctx, ws, phone, SourceProvider, Evidence{ProviderError: "twilio 21610"}); changed {
		t.Error("a provider refusal of an already suppressed number changed the list")
	}
	lifted, err := s.Lift(ctx, ws, phone, SourceKeyword, Evidence{MessageID: "msg_in_2", Keyword: "START"})
	if err != nil || !lifted {
		t.Fatalf("Lift = %v, %v", lifted, err)
	}
	if _, ok, _ := s.Check(ctx, ws, phone); ok {
		t.Error("still suppressed after START")
	}
	if lifted, _ := s.Lift(ctx, ws, phone, SourceKeyword, Evidence{}); lifted {
		t.Error("a second START lifted again")
	}
	// The STOP redelivered after the START names the same message: nothing.
	if _, changed, _ := s.Suppress(ctx, ws, phone, SourceKeyword, ev); changed {
		t.Error("a redelivered STOP suppressed again after START")
	}
	// A new STOP does.
	if _, changed, _ := s.Suppress(ctx, ws, phone, SourceKeyword, Evidence{MessageID: "msg_in_3"}); !changed {
		t.Error("a new STOP did not suppress")
	}
	if len(*changes) != 3 {
		t.Errorf("changes = %d, want 3 (suppress, lift, suppress)", len(*changes))
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	const ws = "ws_list"
	addrs := []string{"+15550100001", "a@example.com", "+15550100002", "b@example.com", "+15550100003"}
	for _, a := range addrs {
		if _, _, err := s.Suppress(ctx, ws, a, SourceAPI, Evidence{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Suppress(ctx, "ws_other", "+15550100009", SourceAPI, Evidence{}); err != nil {
		t.Fatal(err)
	}
	// Lift one and re-suppress another: each active one appears once.
	if _, err := s.Lift(ctx, ws, "a@example.com", SourceAPI, Evidence{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lift(ctx, ws, "+15550100001", SourceAPI, Evidence{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Suppress(ctx, ws, "+15550100001", SourceAPI, Evidence{Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := s.List(ctx, ws, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range p.Suppressions {
			got = append(got, sp.Address)
		}
		if p.NextCursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("no end of pages")
		}
		cursor = p.NextCursor
	}
	want := []string{"+15550100001", "+15550100003", "b@example.com", "+15550100002"}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	if _, err := s.List(ctx, ws, "bogus", 2); msgapi.ErrorCode(err) != msgapi.CodeInvalid {
		t.Errorf("bad cursor: %v, want invalid_request", err)
	}
	p, err := s.List(ctx, "ws_none", "", 10)
	if err != nil || len(p.Suppressions) != 0 || p.NextCursor != "" {
		t.Errorf("empty workspace: %+v, %v", p, err)
	}
}

func TestClaimReplyOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			won, err := s.ClaimReply(ctx, "ws_r", "msg_in_x")
			if err != nil {
				t.Error(err)
			}
			if won {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d claims won, want 1", wins)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	tk, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A second process reads the same key.
	tk2, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := tk.Make("ws_t", "ann@example.com")
	ws, addr, ok := tk2.Open(tok)
	if !ok || ws != "ws_t" || addr != "ann@example.com" {
		t.Fatalf("Open = %q, %q, %v", ws, addr, ok)
	}
	if tk.Make("ws_t", "ann@example.com") == tok {
		t.Error("two tokens for one address are equal (no nonce)")
	}
	for i := range tok {
		b := []byte(tok)
		b[i] ^= 1
		if _, _, ok := tk.Open(string(b)); ok {
			t.Fatalf("a token altered at byte %d opened", i)
		}
	}
	for _, bad := range []string{"", "x", tok[:len(tok)-1], tok + "A"} {
		if _, _, ok := tk.Open(bad); ok {
			t.Errorf("Open(%q) ok", bad)
		}
	}
	other, _ := NewTokens(make([]byte, 32))
	if _, _, ok := other.Open(tok); ok {
		t.Error("a token opened under another key")
	}
}

func TestKeywordsHandle(t *testing.T) {
	ctx := context.Background()
	s, changes := newStore(t)
	var replies []string
	k := NewKeywords(KeywordOptions{Store: s,
		ReplyText: func(context.Context, string) (string, error) { return "You are unsubscribed.", nil },
		Reply: func(_ context.Context, in Inbound, text string) (string, string) {
			replies = append(replies, in.Phone+": "+text)
			return "sent", ""
		}})
	stop := Inbound{WorkspaceID: "ws_k", MessageID: "msg_in_stop", Channel: "sms", Phone: "+15550100000", Text: "  Stop "}
	for range 3 { // the vendor redelivers
		if err := k.Handle(ctx, stop); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s.Check(ctx, "ws_k", "+15550100000"); !ok {
		t.Fatal("not suppressed after STOP")
	}
	if len(*changes) != 1 || len(replies) != 1 {
		t.Errorf("after 3 deliveries of one STOP: %d changes, %d replies; want 1 and 1", len(*changes), len(replies))
	}
	for _, text := range []string{"HELP", "hello", "stop please"} {
		if err := k.Handle(ctx, Inbound{WorkspaceID: "ws_k", MessageID: "msg_in_" + text, Phone: "+15550100000", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Handle(ctx, Inbound{WorkspaceID: "ws_k", MessageID: "msg_in_start", Phone: "+15550100000", Text: "START"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Check(ctx, "ws_k", "+15550100000"); ok {
		t.Error("still suppressed after START")
	}
	if len(*changes) != 2 || len(replies) != 1 {
		t.Errorf("%d changes, %d replies; want 2 and 1", len(*changes), len(replies))
	}
}

// Concurrent deliveries of one STOP record one change (one event, one
// metric), decided by an insert.
func TestConcurrentSuppressRecordsOnce(t *testing.T) {
	ctx := context.Background()
	s, changes := newStore(t)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			if _, _, err := s.Suppress(ctx, "ws_c", "+15550100000", SourceKeyword, Evidence{MessageID: "msg_in_same"}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if _, ok, _ := s.Check(ctx, "ws_c", "+15550100000"); !ok {
		t.Fatal("not suppressed")
	}
	if n := len(*changes); n != 1 {
		t.Errorf("%d changes recorded for one STOP delivered 8 times at once, want 1", n)
	}
}
