package openapi

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
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
	"POST /api/messages", "GET /api/messages/{id}", "DELETE /api/dedup-locks/{lockId}",
	"POST /admin/workspaces", "POST /admin/workspaces/{id}/keys", "PUT /admin/workspaces/{id}/secrets/{channel}",
	"POST /api/webhooks/{workspaceId}/{channel}",
	"POST /api/webhook-endpoints", "GET /api/webhook-endpoints", "DELETE /api/webhook-endpoints/{id}",
	"GET /api/events", "GET /api/events/{id}", "POST /api/events/{id}/redeliver",
	"POST /api/receipts/twilio", "POST /api/receipts/webhook",
	"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.yaml", "GET /docs",
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
	rendered, err := Page()
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
	for _, path := range doc.Paths.InMatchingOrder() {
		for _, op := range doc.Paths.Value(path).Operations() {
			if !ids["op-"+op.OperationID] {
				t.Errorf("no section for operation %s", op.OperationID)
			}
		}
	}
	for name := range doc.Components.Schemas {
		if !ids["schema-"+name] {
			t.Errorf("no section for schema %s", name)
		}
	}
	codes, _ := ProblemCodes(doc)
	for _, c := range codes {
		if !ids["error-"+c.Code] {
			t.Errorf("no anchor error-%s: the problem type /docs#error-%s would point nowhere", c.Code, c.Code)
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
	// Self-contained: nothing is loaded from anywhere, no scripts.
	for _, bad := range []string{"<script", "<link", "src=", "@import", "url(", `href="http`, `href="//`} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page contains %q: it must load nothing from elsewhere", bad)
		}
	}
	// Examples are shown as the client would see them.
	for _, want := range []string{`"duplicateOnly": true`, `"message": null`, `Retry-After`, `Idempotency-Key`, `Idempotent-Replayed`} {
		if !strings.Contains(html.UnescapeString(page), want) {
			t.Errorf("the page does not show %s", want)
		}
	}
}

func TestRegister(t *testing.T) {
	e := echo.New()
	Register(e)
	for _, tc := range []struct {
		path, contentType string
		body              []byte
	}{
		{"/openapi.yaml", YAMLContentType, spec},
		{"/docs", HTMLContentType, nil},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != tc.contentType {
			t.Errorf("GET %s: %d %q, want 200 %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.contentType)
		}
		if tc.body != nil && !bytes.Equal(rec.Body.Bytes(), tc.body) {
			t.Errorf("GET %s: not the embedded document", tc.path)
		}
	}
}

// The committed client is what oapi-codegen makes of the committed
// document: regenerate it into a temporary file and compare.
func TestClientUpToDate(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("client", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "client.gen.go")
	cfg = bytes.Replace(cfg, []byte("output: client.gen.go"), []byte("output: "+out), 1)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", cfgPath, "openapi.yaml")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(filepath.Join("client", "client.gen.go"))
	if !bytes.Equal(got, want) {
		t.Error("openapi/client/client.gen.go is stale: run go generate ./openapi/...")
	}
}
