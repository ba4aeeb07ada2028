package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
)

// swaggerUIVersion is the vendored swagger-ui-dist release (swaggerui/).
const swaggerUIVersion = "5.35.0"

// The page's own assets next to Swagger UI's: the start-up script and a
// little CSS for the Errors section. The script is a file, not inline, so
// the page's Content-Security-Policy allows scripts from 'self' only.
//
//go:embed swaggerui/swagger-ui-bundle.js swaggerui/swagger-ui.css swaggerui/LICENSE swaggerui/NOTICE swaggerui/swagger-ui-bundle.js.LICENSE.txt
//go:embed assets/docs.js assets/docs.css
var assetFS embed.FS

// docsCSP keeps the page to this server: scripts and styles from here (Swagger
// UI sets inline styles), images from here or data: URIs, "Try it out"
// calls to this origin only.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one file under /docs/assets/, with its gzip form made once.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// assets maps a served name (/docs/assets/NAME) to its embedded file.
var assetFiles = map[string]string{
	"swagger-ui-bundle.js":             "swaggerui/swagger-ui-bundle.js",
	"swagger-ui.css":                   "swaggerui/swagger-ui.css",
	"swagger-ui-LICENSE":               "swaggerui/LICENSE",
	"swagger-ui-NOTICE":                "swaggerui/NOTICE",
	"swagger-ui-bundle.js.LICENSE.txt": "swaggerui/swagger-ui-bundle.js.LICENSE.txt",
	"docs.js":                          "assets/docs.js",
	"docs.css":                         "assets/docs.css",
}

func loadAssets() (map[string]*asset, error) {
	out := map[string]*asset{}
	for name, file := range assetFiles {
		b, err := assetFS.ReadFile(file)
		if err != nil {
			return nil, err
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" || strings.Contains(name, "LICENSE") || strings.Contains(name, "NOTICE") {
			ct = "text/plain; charset=utf-8"
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		sum := sha256.Sum256(b)
		out[name] = &asset{body: b, gz: gz.Bytes(), contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out, nil
}

// serve answers GET /docs/assets/NAME: gzip when the client takes it, 304
// for a matching If-None-Match. The page links each asset with ?v=<its
// ETag>, so a new build's assets are fetched anew.
func (a *asset) serve(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	if c.Request().Header.Get("If-None-Match") == a.etag {
		return c.NoContent(http.StatusNotModified)
	}
	if strings.Contains(c.Request().Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		return c.Blob(http.StatusOK, a.contentType, a.gz)
	}
	return c.Blob(http.StatusOK, a.contentType, a.body)
}

// ProblemCode is one entry of the document's x-problem-codes: a stable
// error code, the HTTP status it is sent with, and what it means.
type ProblemCode struct {
	Code        string `json:"code"`
	Status      int    `json:"status"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// ProblemCodes returns the document's error codes in document order.
func ProblemCodes(doc *openapi3.T) ([]ProblemCode, error) {
	raw, ok := doc.Extensions["x-problem-codes"]
	if !ok {
		return nil, fmt.Errorf("openapi.yaml has no x-problem-codes")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var codes []ProblemCode
	if err := json.Unmarshal(b, &codes); err != nil {
		return nil, fmt.Errorf("x-problem-codes: %w", err)
	}
	return codes, nil
}

// codeSpan renders Markdown's `code` spans of an already escaped text.
var codeSpan = regexp.MustCompile("`([^`]+)`")

func inlineCode(s string) template.HTML {
	return template.HTML(codeSpan.ReplaceAllString(template.HTMLEscapeString(strings.TrimSpace(s)), "<code>$1</code>"))
}

var pageTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{"md": inlineCode}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css?v={{.V "swagger-ui.css"}}">
<link rel="stylesheet" href="/docs/assets/docs.css?v={{.V "docs.css"}}">
</head>
<body>
<section id="first-message" class="docs-start">
<h2>Send your first message</h2>
<ol>
<li>Get a workspace API key. The operator creates a workspace with the admin token; the answer's <code>apiKey</code> is shown once:
<pre>KEY=$(curl -s -X POST <span class="docs-origin">http://localhost:8080</span>/admin/workspaces \
  -H "Authorization: Bearer $MSGAPI_ADMIN_TOKEN" -H 'Content-Type: application/json' \
  -d '{"name":"Acme"}' | sed -n 's/.*"apiKey":"\([^"]*\)".*/\1/p')</pre>
(with no server running, <code>eval "$(msgapi workspace create Acme)"</code> does the same).</li>
<li>Send an SMS: 201 and the message.
<pre>curl -s -X POST <span class="docs-origin">http://localhost:8080</span>/api/messages -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -d '{"channel":"sms","recipientPhone":"+15550100000","body":"Hello from msgapi"}'</pre>
The same request again sends nothing: it answers with the original message and <code>duplicateOnly: true</code>.</li>
<li>Or on this page: <b>Authorize</b> with the key (<code>apiKey</code>), open <b>POST /api/messages</b>, <b>Try it out</b>, <b>Execute</b>.</li>
</ol>
<p>Below: the workspace routes (a workspace API key), then the operator's <b>admin</b> routes (the admin token), then health and this document; the error codes are at the end.</p>
</section>
<div id="swagger-ui"><noscript><p class="docs-noscript">This page needs JavaScript for the interactive reference. The contract itself is <a href="/openapi.yaml">/openapi.yaml</a>; the error codes are below.</p></noscript></div>
<section id="errors" class="docs-errors">
<h2>Errors</h2>
<p>Every error is an RFC 9457 problem document (<code>application/problem+json</code>) with <code>success: false</code>, a stable <code>code</code> and the request id. Its <code>type</code> links here.</p>
{{range .Codes}}<div class="docs-error" id="error-{{.Code}}">
<h3><a href="#error-{{.Code}}"><code>{{.Code}}</code></a> <span class="docs-status">{{.Status}}</span> {{.Title}}</h3>
<p>{{md .Description}}</p>
</div>
{{end}}<p class="docs-credit">Reference rendered by <a href="/docs/assets/swagger-ui-LICENSE?v={{.V "swagger-ui-LICENSE"}}">Swagger UI {{.SwaggerUI}}</a> (Apache-2.0), served by this server.</p>
</section>
<script src="/docs/assets/swagger-ui-bundle.js?v={{.V "swagger-ui-bundle.js"}}"></script>
<script src="/docs/assets/docs.js?v={{.V "docs.js"}}"></script>
</body>
</html>
`))

type pageView struct {
	Title, SwaggerUI string
	Codes            []ProblemCode
	assets           map[string]*asset
}

// V is an asset's version for its URL (its ETag without quotes).
func (p pageView) V(name string) string { return strings.Trim(p.assets[name].etag, `"`) }

func render(doc *openapi3.T, assets map[string]*asset) ([]byte, error) {
	codes, err := ProblemCodes(doc)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = pageTemplate.Execute(&b, pageView{Title: doc.Info.Title, SwaggerUI: swaggerUIVersion, Codes: codes, assets: assets})
	return b.Bytes(), err
}
