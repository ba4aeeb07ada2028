package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
)

func TestLoad(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", doc.OpenAPI)
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			if op.OperationID == "" || len(op.Tags) == 0 {
				t.Errorf("%s %s: every operation needs an operationId and a tag", method, path)
			}
		}
	}
}

// The operations the server routes. api/routes.go and the webhook and docs
// handlers are the truth; this list is checked against the document so an
// operation cannot be dropped from it silently.
var wantOperations = []string{
	"POST /api/messages", "GET /api/messages/{id}", "POST /api/messages/{id}/cancel", "POST /api/messages/cancel", "DELETE /api/dedup-locks/{lockId}",
	"GET /api/messages", "GET /api/leads", "GET /api/leads/{id}", "GET /api/conversations/{id}",
	"POST /admin/workspaces", "POST /admin/workspaces/{id}/keys", "PUT /admin/workspaces/{id}/secrets/{channel}",
	"GET /admin/workspaces/{id}", "PATCH /admin/workspaces/{id}", "POST /admin/workspaces/{id}/disable",
	"POST /admin/workspaces/{id}/enable", "GET /admin/workspaces/{id}/keys", "DELETE /admin/workspaces/{id}/keys/{keyId}",
	"POST /api/webhooks/{workspaceId}/{channel}",
	"POST /api/webhook-endpoints", "GET /api/webhook-endpoints", "DELETE /api/webhook-endpoints/{id}",
	"GET /api/events", "GET /api/events/{id}", "POST /api/events/{id}/redeliver",
	"POST /api/receipts/twilio", "POST /api/receipts/webhook", "POST /integrations/hubspot/{workspaceId}/actions/send",
	"GET /api/suppressions", "POST /api/suppressions", "GET /api/suppressions/{address}", "DELETE /api/suppressions/{address}",
	"GET /unsubscribe/{token}", "POST /unsubscribe/{token}",
	"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.yaml", "GET /docs", "GET /docs/assets/{file}",
}

func TestEveryOperation(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, path := range doc.Paths.InMatchingOrder() {
		for method := range doc.Paths.Value(path).Operations() {
			got = append(got, method+" "+path)
		}
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(wantOperations)), slices.Sorted(slices.Values(got))); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// The document lists exactly the codes of msgapi's error vocabulary
// (../errors.go), in x-problem-codes and in the Problem schema's enum.
func TestProblemCodesAreTheCodes(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	codes, err := ProblemCodes(doc)
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, c := range codes {
		documented = append(documented, c.Code)
		if c.Status < 400 || c.Status > 599 || c.Title == "" || c.Description == "" {
			t.Errorf("x-problem-codes %q: status, title and description are required: %+v", c.Code, c)
		}
	}
	var enum []string
	for _, e := range doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		enum = append(enum, e.(string))
	}
	want := codeConstants(t)
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(documented))); diff != "" {
		t.Errorf("x-problem-codes vs the Code constants of errors.go (-code +document):\n%s", diff)
	}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(enum))); diff != "" {
		t.Errorf("Problem.code enum vs the Code constants of errors.go (-code +document):\n%s", diff)
	}
}

// codeConstants reads the values of every constant of type Code declared
// in the root package's errors.go.
func codeConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			return true
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				out = append(out, s)
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("no Code constants found in ../errors.go")
	}
	slices.Sort(out)
	return out
}

func TestDocsPage(t *testing.T) {
	assets, err := loadAssets()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Page(assets)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := Load()
	page := string(rendered)

	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if ids[m[1]] {
			t.Errorf("id %q appears twice", m[1])
		}
		ids[m[1]] = true
	}
	codes, _ := ProblemCodes(doc)
	for _, c := range codes {
		if !ids["error-"+c.Code] {
			t.Errorf("no anchor error-%s: the problem type /docs#error-%s would point nowhere", c.Code, c.Code)
		}
		if !strings.Contains(html.UnescapeString(page), c.Title) {
			t.Errorf("the Errors section lacks the title of %s", c.Code)
		}
	}
	// Every in-page link lands, including every problem type URI the
	// document's examples use.
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !ids[m[1]] {
			t.Errorf("link #%s points nowhere", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`/docs#(error-[a-z_]+)`).FindAllStringSubmatch(string(spec), -1) {
		if !ids[m[1]] {
			t.Errorf("the document links /docs#%s, which the page lacks", m[1])
		}
	}
	// Nothing is loaded from elsewhere: every script, stylesheet and link
	// is this server's, and every asset the page names is served.
	refs := regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 5 {
		t.Errorf("the page references %d files, want Swagger UI's and its own", len(refs))
	}
	for _, m := range refs {
		ref := html.UnescapeString(m[1])
		if !strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "//") {
			t.Errorf("the page references %q, not a file of this server", ref)
			continue
		}
		if name, ok := strings.CutPrefix(ref, "/docs/assets/"); ok {
			name, v, _ := strings.Cut(name, "?v=")
			if a := assets[name]; a == nil || `"`+v+`"` != a.etag {
				t.Errorf("the page references %q: not a served asset at its current version", ref)
			}
		} else if ref != "/openapi.yaml" {
			t.Errorf("the page references %q", ref)
		}
	}
	// A newcomer's first message comes before the reference.
	first, ref := strings.Index(page, `id="first-message"`), strings.Index(page, `id="swagger-ui"`)
	if first < 0 || first > ref || !strings.Contains(page[first:ref], "/api/messages") || !strings.Contains(page[first:ref], "Authorization: Bearer $KEY") {
		t.Errorf("no first-message block with a send above the reference")
	}
	// The reference lists the tags in the document's order: every tag of a
	// workspace route (/api/…) before admin, admin before health and docs.
	order := map[string]int{}
	for i, tag := range doc.Tags {
		order[tag.Name] = i
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			for _, tag := range op.Tags {
				if _, ok := order[tag]; !ok {
					t.Errorf("%s %s: tag %s is not in the document's tags", method, path, tag)
				}
				if strings.HasPrefix(path, "/api/") && order[tag] > order["admin"] {
					t.Errorf("%s %s (a workspace route): tag %s comes after admin", method, path, tag)
				}
				if strings.HasPrefix(path, "/admin/") && tag != "admin" {
					t.Errorf("%s %s: tagged %s, not admin", method, path, tag)
				}
			}
		}
	}
	if order["admin"] > order["health"] {
		t.Error("admin comes after health")
	}
	// The start-up script calls nothing but this server.
	js, _ := assetFS.ReadFile("assets/docs.js")
	if regexp.MustCompile(`https?://`).Match(js) || !strings.Contains(string(js), "validatorUrl: null") {
		t.Error("docs.js must name no other host and switch the validator badge off")
	}
}

// The vendored Swagger UI is the pinned release, unchanged, with its
// licence; the README's hashes are the files'.
func TestVendoredSwaggerUI(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("swaggerui", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "swagger-ui-dist@"+swaggerUIVersion) {
		t.Errorf("swaggerui/README.md does not name swagger-ui-dist@%s", swaggerUIVersion)
	}
	for _, f := range []string{"swagger-ui-bundle.js", "swagger-ui.css"} {
		b, err := assetFS.ReadFile("swaggerui/" + f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if row := "| " + f + " | " + hex.EncodeToString(sum[:]) + " |"; !strings.Contains(string(readme), row) {
			t.Errorf("%s: its sha256 is not the one swaggerui/README.md pins (%s)", f, row)
		}
	}
	lic, _ := assetFS.ReadFile("swaggerui/LICENSE")
	if !strings.Contains(string(lic), "Apache License") {
		t.Error("swaggerui/LICENSE is not the Apache License")
	}
}

func TestRegister(t *testing.T) {
	e := echo.New()
	// The api package's error handler, as far as these routes need it.
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var me *msgapi.Error
		if errors.As(err, &me) && me.Code == msgapi.CodeNotFound {
			_ = c.NoContent(http.StatusNotFound)
			return
		}
		t.Errorf("%s: error %v, want a msgapi not_found error", c.Request().URL, err)
		_ = c.NoContent(http.StatusInternalServerError)
	}
	Register(e)
	for _, tc := range []struct {
		path, acceptEncoding string
		status               int
		contentType          string
		body                 []byte
		gzip                 bool
	}{
		{"/openapi.yaml", "", 200, YAMLContentType, spec, false},
		{"/docs", "", 200, HTMLContentType, nil, false},
		{"/docs/assets/docs.js", "", 200, "text/javascript; charset=utf-8", mustAsset(t, "assets/docs.js"), false},
		{"/docs/assets/swagger-ui.css", "", 200, "text/css; charset=utf-8", mustAsset(t, "swaggerui/swagger-ui.css"), false},
		{"/docs/assets/swagger-ui-bundle.js", "gzip, deflate", 200, "text/javascript; charset=utf-8", mustAsset(t, "swaggerui/swagger-ui-bundle.js"), true},
		{"/docs/assets/swagger-ui-LICENSE", "", 200, "text/plain; charset=utf-8", mustAsset(t, "swaggerui/LICENSE"), false},
		{"/docs/assets/secret.go", "", 404, "", nil, false},
		{"/favicon.ico", "", 204, "", nil, false},
		{"/docs/assets/..%2fopenapi.yaml", "", 404, "", nil, false},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", tc.acceptEncoding)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, rec.Code, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if got := rec.Header().Get("Content-Type"); got != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.contentType)
		}
		body := rec.Body.Bytes()
		if got := rec.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("GET %s: gzip %v, want %v", tc.path, got, tc.gzip)
		} else if got {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if tc.body != nil && !bytes.Equal(body, tc.body) {
			t.Errorf("GET %s: not the embedded file", tc.path)
		}
	}
	// The page allows only this origin.
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET /docs: Content-Security-Policy %q", csp)
	}
	// A current copy is not sent again.
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs/assets/docs.css", nil))
	req := httptest.NewRequest(http.MethodGet, "/docs/assets/docs.css", nil)
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec2 := httptest.NewRecorder()
	e.ServeHTTP(rec2, req)
	if rec.Header().Get("ETag") == "" || rec2.Code != http.StatusNotModified || rec2.Body.Len() != 0 {
		t.Errorf("If-None-Match with the ETag %q: %d, want 304 without a body", rec.Header().Get("ETag"), rec2.Code)
	}
}

func mustAsset(t *testing.T, name string) []byte {
	t.Helper()
	b, err := assetFS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
