package workspace_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

func TestParseSettingsPatch(t *testing.T) {
	for _, tc := range []struct {
		body    string
		invalid []string // the fields reported, sorted
	}{
		{`{}`, nil},
		{`{"dedupWindow":"1m","dedupWait":"0s","rateLimit":{"perSecond":1,"burst":1},"defaultRegion":"gb"}`, nil},
		{`{"dedupWindow":"24h","dedupWait":"10s","rateLimit":{"perSecond":1000,"burst":10000},"defaultRegion":"US"}`, nil},
		{`{"dedupWindow":null,"dedupWait":null,"rateLimit":null,"defaultRegion":null}`, nil},
		{`{"dedupWindow":"59s"}`, []string{"dedupWindow"}},
		{`{"dedupWindow":"25h"}`, []string{"dedupWindow"}},
		{`{"dedupWindow":900}`, []string{"dedupWindow"}},
		{`{"dedupWait":"-1s","dedupWindow":"soon"}`, []string{"dedupWait", "dedupWindow"}},
		{`{"dedupWait":"11s"}`, []string{"dedupWait"}},
		{`{"rateLimit":{"perSecond":0,"burst":5}}`, []string{"rateLimit"}},
		{`{"rateLimit":{"perSecond":5}}`, []string{"rateLimit"}},
		{`{"rateLimit":{"perSecond":5,"burst":10001}}`, []string{"rateLimit"}},
		{`{"rateLimit":{"perSecond":5,"burst":5,"per":"1m"}}`, []string{"rateLimit"}},
		{`{"rateLimit":5}`, []string{"rateLimit"}},
		{`{"defaultRegion":"ZZ"}`, []string{"defaultRegion"}},
		{`{"defaultRegion":"USA"}`, []string{"defaultRegion"}},
		{`{"defaultRegion":1}`, []string{"defaultRegion"}},
		{`{"dedupWindw":"30m"}`, []string{"dedupWindw"}},
		{`{"name":null}`, []string{"name"}},
	} {
		_, err := workspace.ParseSettingsPatch([]byte(tc.body))
		var got []string
		if e, ok := err.(*msgapi.Error); ok {
			for _, f := range e.Fields {
				got = append(got, f.Field)
			}
		} else if err != nil {
			t.Errorf("%s: %v, want a *msgapi.Error", tc.body, err)
		}
		if diff := cmp.Diff(tc.invalid, got); diff != "" {
			t.Errorf("%s: invalid fields (-want +got):\n%s", tc.body, diff)
		}
	}
	for _, body := range []string{``, `[]`, `null`, `{"a":1} {}`, `"x"`} {
		if _, err := workspace.ParseSettingsPatch([]byte(body)); msgapi.ErrorCode(err) != msgapi.CodeInvalid {
			t.Errorf("%q: %v, want invalid_request", body, err)
		}
	}
}

// Settings are stored on the workspace, travel with its cached keys (no
// round trip on the request path), reach another process within the TTL,
// and null returns a setting to the global value.
func TestSettings(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	admin := workspace.NewStore(st, time.Minute)
	ws, key, err := admin.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	global := ratelimit.Limit{PerSecond: 20, Burst: 40}
	if ws.DedupWindow(15*time.Minute) != 15*time.Minute || ws.DedupWait(3*time.Second) != 3*time.Second ||
		ws.DefaultRegion("US") != "US" || ws.RateLimit(global) != global {
		t.Errorf("a new workspace does not use the global values: %+v", ws.Settings)
	}

	clk := newClock()
	st2 := storetest.Second(t, st)
	proc := workspace.New(workspace.Options{Store: st2, CacheTTL: 5 * time.Second, Now: clk.Now})
	mustAuth(t, proc, key, ws.ID)

	p, err := workspace.ParseSettingsPatch([]byte(`{"dedupWindow":"30m","dedupWait":"0s","rateLimit":{"perSecond":2,"burst":3},"defaultRegion":"gb"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := admin.UpdateSettings(ctx, ws.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	want := ratelimit.Limit{PerSecond: 2, Burst: 3}
	check := func(what string, w workspace.Workspace) {
		t.Helper()
		if w.DedupWindow(15*time.Minute) != 30*time.Minute || w.DedupWait(3*time.Second) != 0 ||
			w.DefaultRegion("US") != "GB" || w.RateLimit(global) != want {
			t.Errorf("%s: settings %+v, want 30m, 0s, GB, 2/s burst 3", what, w.Settings)
		}
	}
	check("UpdateSettings", got)
	clk.Add(5 * time.Second)
	check("the other process's authenticated workspace, TTL later", mustAuth(t, proc, key, ws.ID))
	if n := rounds(st2, proc, func() { check("cached", mustAuth(t, proc, key, ws.ID)) }); n != 0 {
		t.Errorf("reading the settings cost %d round trips, want 0", n)
	}

	p, err = workspace.ParseSettingsPatch([]byte(`{"dedupWait":null,"defaultRegion":null}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err = admin.UpdateSettings(ctx, ws.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.DedupWait(3*time.Second) != 3*time.Second || got.DefaultRegion("US") != "US" || got.DedupWindow(0) != 30*time.Minute {
		t.Errorf("after null: %+v, want wait and region back to global, window kept", got.Settings)
	}
	if _, err := admin.UpdateSettings(ctx, "ws_nope", p); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
		t.Errorf("unknown workspace: %v, want not found", err)
	}
}
