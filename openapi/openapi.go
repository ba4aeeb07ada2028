// Package openapi is msgapi's HTTP contract: openapi.yaml, embedded in the
// binary, served at GET /openapi.yaml and shown at GET /docs by Swagger UI
// (vendored in swaggerui/, served by msgapi itself: no CDN).
//
// It decides what the API promises: every operation, status, header and
// response shape, with nullability and required keys exact enough that the
// whole-system contract test (test/contract_test.go) fails when the server
// answers anything the document does not allow. The request schema is the
// schema-expressible part of send.ParseRequest, and a test proves
// the two agree; what a schema cannot say is listed in the document's own
// description. The page reads the served document, so it can never
// disagree with it; its Errors section, rendered here from
// x-problem-codes, is where every problem type URI (/docs#error-<code>)
// points.
package openapi

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
)

//go:embed openapi.yaml
var spec []byte

// YAML returns the OpenAPI document as served (a copy).
func YAML() []byte { return bytes.Clone(spec) }

// Load parses and validates the embedded document.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	return doc, nil
}

// Content types of the two documents.
const (
	YAMLContentType = "application/yaml"
	HTMLContentType = "text/html; charset=utf-8"
)

// Register mounts GET /openapi.yaml, GET /docs (Swagger UI on the embedded
// document, with a first-message block and an anchor per error code),
// GET /favicon.ico (204) and GET /docs/assets/{file}
// (Swagger UI's vendored files and the page's own, served from the
// binary). The page is rendered on first request and kept; a document
// that does not parse (tests prevent it) makes /docs an error, never the
// server.
func Register(e *echo.Echo) {
	var (
		once   sync.Once
		page   []byte
		assets map[string]*asset
		err    error
	)
	load := func() error {
		once.Do(func() {
			if assets, err = loadAssets(); err == nil {
				page, err = Page(assets)
			}
		})
		return err
	}
	e.GET("/openapi.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, YAMLContentType, spec)
	})
	e.GET("/docs", func(c echo.Context) error {
		if err := load(); err != nil {
			return err
		}
		c.Response().Header().Set("Content-Security-Policy", docsCSP)
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		return c.Blob(http.StatusOK, HTMLContentType, page)
	})
	// Browsers ask for /favicon.ico with every page: an empty answer they
	// may cache, not a 404 in the access log each time.
	e.GET("/favicon.ico", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=86400")
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/docs/assets/:file", func(c echo.Context) error {
		if err := load(); err != nil {
			return err
		}
		a, ok := assets[c.Param("file")]
		if !ok {
			return msgapi.Errorf(msgapi.CodeNotFound, "/docs/assets has no file %q", c.Param("file"))
		}
		return a.serve(c)
	})
}

// Page renders the documentation page from the embedded document.
func Page(assets map[string]*asset) ([]byte, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	return render(doc, assets)
}
