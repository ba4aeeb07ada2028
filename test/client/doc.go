// Package client is a Go client for msgapi, generated from the OpenAPI
// document (openapi/openapi.yaml) by oapi-codegen. The contract test drives
// the binary through it (test/contract_client_test.go); it lives under test/
// because only tests use it, so the server's packages never import it.
// Do not edit client.gen.go: change the document and run
// `go generate ./test/client`; TestClientUpToDate fails while it is stale.
//
// Authenticate with a request editor that sets the bearer token:
//
//	c, err := client.NewClientWithResponses("http://localhost:8080",
//		client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
//			r.Header.Set("Authorization", "Bearer "+apiKey)
//			return nil
//		}))
package client

//go:generate go tool oapi-codegen -config config.yaml ../../openapi/openapi.yaml
