package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// browser finds a Chromium to drive. .ci/run installs Debian's chromium, so
// in CI (CI=true) a missing browser fails the test instead of skipping it.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium): the /docs browser test needs a real browser")
	return ""
}

const (
	sendOp     = "#operations-messages-sendMessage"
	docsBody   = `{"channel":"sms","recipientPhone":"+15550107777","body":"Sent from the docs page"}`
	errorIDKey = "error-idempotency_key_reused"
)

// TestDocsTryIt opens /docs of the real binary in headless Chromium, as a
// new user would: authorizes with a workspace API key, sends a message
// through "Try it out" and sees the 201 on the page; the message is then
// read back through the API. Every request the page makes goes to the
// server itself (no CDN), and a problem type URI (/docs#error-…) lands on
// its entry. MSGAPI_DOCS_SCREENSHOTS=dir saves the README's screenshots
// (docs/docs-page.png, docs/docs-try-it.png) there.
func TestDocsTryIt(t *testing.T) {
	chrome := browser(t)
	began := time.Now()
	p := start(t, embeddedEnv(t, t.TempDir()))
	_, key := p.createWorkspace(admin)
	t.Logf("%v: msgapi up", time.Since(began).Round(time.Millisecond))

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	var (
		mu       sync.Mutex
		requests []string
		problems []string
	)
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			// CSP violations and failed loads are logged as errors.
			// /favicon.ico is answered 204, so it is no exception.
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, fmt.Sprintf("%s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	for _, err := range []error{
		cdpCall(ctx, network.Enable, network.EnableParams{}), cdpCall(ctx, log.Enable, cdp.Empty{}), cdpCall(ctx, runtime.Enable, cdp.Empty{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	apiKeyBox := `//div[contains(@class,"auth-container")][.//h4[contains(.,"apiKey")]]`
	op := func(sel string) chromedp.CSS { return chromedp.CSS(sendOp + " " + sel) }
	mark := func(what string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(context.Context, *chromedp.Target) error {
			t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what)
			return nil
		})
	}
	err := chromedp.Do(ctx,
		mark("browser up"),
		chromedp.Navigate(p.url+"/docs"),
		mark("navigated"),
		chromedp.WaitVisible(chromedp.CSS(sendOp)),

		mark("rendered"),
		// Authorize: the API key into the apiKey scheme's field.
		chromedp.Click(chromedp.CSS(`.auth-wrapper .authorize`)),
		chromedp.WaitVisible(chromedp.CSS(`.modal-ux`)),
		chromedp.SendKeys(apiKeyBox+`//input`, key),
		chromedp.Click(apiKeyBox+`//button[contains(@class,"authorize")]`),
		chromedp.Click(chromedp.CSS(`.modal-ux .btn-done`)),
		chromedp.WaitNotPresent(chromedp.CSS(`.modal-ux`)),

		mark("authorized"),
		// Try it out: POST /api/messages with our body.
		chromedp.Click(op(`.opblock-summary-control`)),
		chromedp.Click(op(`.try-out__btn`)),
		chromedp.WaitVisible(op(`textarea.body-param__text`)),
		// Replace the example as a person does: select all, paste.
		chromedp.Click(op(`textarea.body-param__text`)),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(kb.ModifierCtrl)),
		chromedp.KeyEvent(kb.Backspace),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error { // paste
			return cdpCall(ctx, input.InsertText, input.InsertTextParams{Text: docsBody})
		}),
		mark("typed"),
		chromedp.Click(op(`.execute`)),
		chromedp.WaitVisible(op(`.live-responses-table .response .response-col_status`)),
	)
	if err != nil {
		t.Fatalf("drive /docs: %v\nproblems: %v", err, problems)
	}
	t.Logf("sent through Try it out %v after the start", time.Since(began).Round(time.Millisecond))
	text := func(sel chromedp.CSS) string {
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	status := text(op(`.live-responses-table .response .response-col_status`))
	response := text(op(`.live-responses-table .response .response-col_description`))
	curl := text(op(`.curl-command`))
	if strings.TrimSpace(status) != "201" {
		t.Errorf("the page shows status %q, want 201; response:\n%s", status, response)
	}
	if !strings.Contains(curl, "Authorization: Bearer "+key) || !strings.Contains(curl, p.url+"/api/messages") {
		t.Errorf("the request was not sent to this server with the key:\n%s", curl)
	}
	// The message the page sent is real: read it back with the key.
	id := regexp.MustCompile(`msg_[a-z0-9]+`).FindString(response)
	if got := p.do(http.MethodGet, "/api/messages/"+id, key, ""); id == "" || got.status != 200 || !strings.Contains(string(got.body), "Sent from the docs page") {
		t.Errorf("GET /api/messages/%s: %d %s", id, got.status, got.body)
	}

	// The first-message block names this server; the reference shows the
	// workspace routes' tags, then admin, then health and docs.
	if origin, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".docs-origin").textContent`)); err != nil || origin != p.url {
		t.Errorf("the first-message block names %q (%v), want %s", origin, err, p.url)
	}
	tags, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(".opblock-tag")).map(e => e.getAttribute("data-tag"))`))
	if err != nil || len(tags) < 5 || tags[len(tags)-3] != "admin" || tags[len(tags)-2] != "health" || tags[len(tags)-1] != "docs" {
		t.Errorf("the reference's tags are %v (%v), want the workspace routes', then admin, health, docs", tags, err)
	}

	if dir := os.Getenv("MSGAPI_DOCS_SCREENSHOTS"); dir != "" {
		screenshot(t, ctx, filepath.Join(dir, "docs-try-it.png"), sendOp+` .curl-command`, -150)
		screenshot(t, ctx, filepath.Join(dir, "docs-page.png"), `.swagger-ui .scheme-container`, -10)
	}

	// A problem type URI lands on its entry once the page has rendered.
	err = chromedp.Do(ctx,
		chromedp.Navigate(p.url+"/docs#"+errorIDKey),
		chromedp.WaitVisible(chromedp.CSS(sendOp)),
	)
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const r = document.getElementById(%q).getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight })()`, errorIDKey), chromedp.WithPollingTimeout(10*time.Second)))
	}
	if err != nil {
		t.Errorf("/docs#%s: the entry is not scrolled into view: %v", errorIDKey, err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, u := range requests {
		if !strings.HasPrefix(u, p.url+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page loaded %s: not from this server", u)
		}
	}
	if len(requests) < 5 {
		t.Errorf("saw %d requests, want the page, its assets, the document and the send: %v", len(requests), requests)
	}
	for _, pr := range problems {
		t.Errorf("browser: %s", pr)
	}
}

// screenshot saves the window, scrolled to sel (moved by dy pixels), as a PNG.
func screenshot(t *testing.T, ctx context.Context, path, sel string, dy int) {
	t.Helper()
	js := fmt.Sprintf(`(() => { document.querySelector(%q).scrollIntoView(); window.scrollBy(0, %d); return true })()`, sel, dy)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cdpCall sends one DevTools command and drops its (empty) result.
func cdpCall[P, R any](ctx context.Context, cmd cdp.Command[P, R], params P) error {
	_, err := chromedp.Call(ctx, cmd, params)
	return err
}
