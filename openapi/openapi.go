// Package openapi is msgapi's HTTP contract: openapi.yaml, embedded in the
// binary, served at GET /openapi.yaml and rendered as a self-contained page
// at GET /docs.
//
// It decides what the API promises: every operation, status, header and
// response shape, with nullability and required keys exact enough that the
// whole-system contract test (test/contract_test.go) fails when the server
// answers anything the document does not allow. The request schema is the
// schema-expressible part of messages.ParseSendRequest, and a test proves
// the two agree; what a schema cannot say is listed in the document's own
// description. The page is rendered once, from the parsed document, so it
// can never disagree with it, and it loads nothing from elsewhere: no CDN,
// no scripts.
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

// Register mounts GET /openapi.yaml and GET /docs on e. The page is
// rendered on first request and kept; a document that does not parse
// (tests prevent it) makes /docs an error, never the server.
func Register(e *echo.Echo) {
	var (
		once sync.Once
		page []byte
		err  error
	)
	e.GET("/openapi.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, YAMLContentType, spec)
	})
	e.GET("/docs", func(c echo.Context) error {
		once.Do(func() { page, err = Page() })
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, HTMLContentType, page)
	})
}

// Page renders the documentation page from the embedded document.
func Page() ([]byte, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	return render(doc)
}
