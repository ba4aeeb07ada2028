// Package client is a Go client for msgapi, generated from the OpenAPI
// document (../openapi.yaml) by oapi-codegen. Do not edit client.gen.go:
// change the document and run `go generate ./openapi/...`.
//
// Authenticate with a request editor that sets the bearer token:
//
//	c, err := client.NewClientWithResponses("http://localhost:8080",
//		client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
//			r.Header.Set("Authorization", "Bearer "+apiKey)
//			return nil
//		}))
package client

//go:generate go tool oapi-codegen -config config.yaml ../openapi.yaml
