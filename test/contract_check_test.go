package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/msgapi/msgapi/openapi"
)

// contract drives requests through running msgapi processes, validates
// every response against openapi.yaml and counts which documented
// (operation, status) pairs were answered.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	codes  map[string]openapi.ProblemCode
	client *http.Client

	mu       sync.Mutex
	seen     map[string]int  // "operationId status" → responses
	variants map[string]bool // "operationId status SchemaName"
	replayed bool            // a response had Idempotent-Replayed: true
}

var registerDecoders sync.Once

func newContract(t *testing.T) *contract {
	t.Helper()
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil // match paths on any host: the processes listen on random ports
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	codes, err := openapi.ProblemCodes(doc)
	if err != nil {
		t.Fatal(err)
	}
	registerDecoders.Do(func() {
		// Bodies kin-openapi has no decoder for are validated as text.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/xml", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/css", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.FileBodyDecoder)
	})
	c := &contract{
		doc: doc, router: router, codes: map[string]openapi.ProblemCode{},
		client: &http.Client{Timeout: 60 * time.Second},
		seen:   map[string]int{}, variants: map[string]bool{},
	}
	for _, pc := range codes {
		c.codes[pc.Code] = pc
	}
	return c
}

// call is one request.
type call struct {
	method, path string
	token        string // Authorization: Bearer token, when set
	body         string
	contentType  string // default application/json when body is set
	header       map[string]string
	chunked      bool // send the body without a Content-Length
}

// do sends r to p and checks the response against the document; it fails
// t (without stopping it) on any response the document does not allow.
func (c *contract) do(t *testing.T, p *proc, r call) reply {
	t.Helper()
	rep, err := c.send(t, p, r)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// send is do for other goroutines: it returns transport errors instead of
// stopping the test.
func (c *contract) send(t *testing.T, p *proc, r call) (reply, error) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // unknown length: chunked
		}
	}
	req, err := http.NewRequest(r.method, p.url+r.path, body)
	if err != nil {
		return reply{}, err
	}
	if r.body != "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read response: %w", r.method, r.path, err)
	}
	rep := reply{res.StatusCode, res.Header, b}
	c.check(t, r, rep)
	return rep, nil
}

// check validates one response and records what it covered.
func (c *contract) check(t *testing.T, r call, rep reply) {
	t.Helper()
	what := fmt.Sprintf("%s %s → %d %s", r.method, r.path, rep.status, truncate(rep.body))

	// Every response, documented route or not, carries X-Request-Id, and a
	// problem document is consistent with its status and with the codes
	// the document lists.
	if rep.header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", what)
	}
	// /readyz is the one error that is not a problem document: probes
	// read its status, and its body is a plain status document.
	if ct := rep.header.Get("Content-Type"); ct == "application/problem+json" {
		c.checkProblem(t, what, rep)
	} else if rep.status >= 400 && r.path != "/readyz" {
		t.Errorf("%s: an error answered with Content-Type %q, not application/problem+json", what, ct)
	}

	req, _ := http.NewRequest(r.method, "http://msgapi"+r.path, nil)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// Not an operation of the document (the 404/405 probes): only the
		// checks above apply.
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 rep.status,
		Header:                 rep.header,
		Body:                   io.NopCloser(bytes.NewReader(rep.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s: the document does not allow this response:\n%v", what, err)
		return
	}

	key := fmt.Sprintf("%s %d", route.Operation.OperationID, rep.status)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[key]++
	if rep.header.Get("Idempotent-Replayed") == "true" {
		c.replayed = true
	}
	// Which documented content type, and which oneOf variant of its
	// schema, did the response use?
	ct := rep.header.Get("Content-Type")
	mt := route.Operation.Responses.Status(rep.status).Value.Content.Get(ct)
	if mt == nil {
		return
	}
	c.variants[key+" "+mediaKey(route.Operation.Responses.Status(rep.status).Value.Content, mt)] = true
	if mt.Schema == nil || len(mt.Schema.Value.OneOf) == 0 {
		return
	}
	v := jsonValue(rep.body)
	for _, o := range mt.Schema.Value.OneOf {
		if o.Value.VisitJSON(v, openapi3.VisitAsResponse()) == nil {
			c.variants[key+" "+refName(o)] = true
		}
	}
}

// mediaKey is the content map key of mt.
func mediaKey(content openapi3.Content, mt *openapi3.MediaType) string {
	for k, v := range content {
		if v == mt {
			return k
		}
	}
	return "?"
}

func refName(s *openapi3.SchemaRef) string {
	return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
}

func (c *contract) checkProblem(t *testing.T, what string, rep reply) {
	t.Helper()
	var p struct {
		Type      string `json:"type"`
		Title     string `json:"title"`
		Status    int    `json:"status"`
		Code      string `json:"code"`
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(rep.body, &p); err != nil {
		t.Errorf("%s: problem document is not JSON: %v", what, err)
		return
	}
	if err := c.doc.Components.Schemas["Problem"].Value.VisitJSON(jsonValue(rep.body), openapi3.VisitAsResponse()); err != nil {
		t.Errorf("%s: not a Problem: %v", what, err)
	}
	pc, ok := c.codes[p.Code]
	switch {
	case !ok:
		t.Errorf("%s: code %q is not in the document's x-problem-codes", what, p.Code)
	case pc.Status != rep.status || p.Status != rep.status:
		t.Errorf("%s: code %q documented with status %d; body says %d", what, p.Code, pc.Status, p.Status)
	case pc.Title != p.Title:
		t.Errorf("%s: code %q documented with title %q, body says %q", what, p.Code, pc.Title, p.Title)
	}
	if p.Type != "/docs#error-"+p.Code {
		t.Errorf("%s: type %q, want /docs#error-%s", what, p.Type, p.Code)
	}
	if h := rep.header.Get("X-Request-Id"); p.RequestID != h {
		t.Errorf("%s: requestId %q, X-Request-Id %q", what, p.RequestID, h)
	}
}

// excluded names the documented (operation, status) pairs that no request
// can reach, each with the reason. A pair listed here that is answered
// anyway fails the test: the reason has gone stale.
var excluded = map[string]string{
	"createWorkspace 500":  noInternal,
	"createApiKey 500":     noInternal,
	"setWebhookSecret 500": noInternal,
	"getWorkspace 500":     noInternal,
	"updateWorkspace 500":  noInternal,
	"disableWorkspace 500": noInternal,
	"enableWorkspace 500":  noInternal,
	"listApiKeys 500":      noInternal,
	"revokeApiKey 500":     noInternal,
	"deleteDedupLock 500":  noInternal,
	"receiveWebhook 500":   noInternal,

	"createWebhookEndpoint 500": noInternal,
	"listWebhookEndpoints 500":  noInternal,
	"deleteWebhookEndpoint 500": noInternal,
	"listEvents 500":            noInternalEvents,
	"getEvent 500":              noInternalEvents,
	"redeliverEvent 500":        noInternal,
	"receiveTwilioReceipt 500":  noInternal,
	"listSuppressions 500":      noInternal,
	"createSuppression 500":     noInternal,
	"getSuppression 500":        noInternal,
	"deleteSuppression 500":     noInternal,
	"receiveRelayReceipt 500":   noInternal,
	"hubspotAction 500":         noInternal,
}

const noInternalEvents = "only an event payload altered in the store so that it is no longer JSON reaches an internal error here; payloads are written once, by msgapi, from json.Marshal. Store errors are 503."

const noInternal = "no request reaches an internal error here: every store and driver error becomes 503 at its package boundary, and these handlers write fixed shapes. The 500 document itself is exercised on sendMessage and getMessage, with a stored message the server cannot render."

// verify fails t for every documented (operation, status) pair that was
// never answered and is not excluded, and, for the pairs answered, for
// every documented content type and oneOf variant never seen.
func (c *contract) verify(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var documented, wantVariants []string
	for _, path := range c.doc.Paths.InMatchingOrder() {
		for _, op := range c.doc.Paths.Value(path).Operations() {
			for status, r := range op.Responses.Map() {
				key := op.OperationID + " " + status
				documented = append(documented, key)
				if _, skip := excluded[key]; skip {
					continue
				}
				for ct, mt := range r.Value.Content {
					wantVariants = append(wantVariants, key+" "+ct)
					if mt.Schema != nil {
						for _, o := range mt.Schema.Value.OneOf {
							wantVariants = append(wantVariants, key+" "+refName(o))
						}
					}
				}
			}
		}
	}
	slices.Sort(documented)
	for _, k := range documented {
		reason, skip := excluded[k]
		switch {
		case skip && c.seen[k] > 0:
			t.Errorf("%s is excluded (%s) but was answered: remove the exclusion", k, reason)
		case skip:
			t.Logf("not exercised, by design: %s: %s", k, reason)
		case c.seen[k] == 0:
			t.Errorf("documented response %s was never exercised", k)
		}
	}
	for k := range excluded {
		if !slices.Contains(documented, k) {
			t.Errorf("exclusion %q names no documented response", k)
		}
	}
	slices.Sort(wantVariants)
	for _, v := range wantVariants {
		if !c.variants[v] {
			t.Errorf("response variant %s was never seen", v)
		}
	}
	if !c.replayed {
		t.Error("no response carried Idempotent-Replayed: true")
	}
}

func jsonValue(b []byte) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

func truncate(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
