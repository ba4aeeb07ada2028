package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"
)

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

// methodOrder is the order operations of one path are listed in.
var methodOrder = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

type pageView struct {
	Title, Version string
	Intro          []template.HTML
	Security       []schemeView
	Tags           []tagView
	Schemas        []schemaView
	Errors         []errorView
}

type schemeView struct {
	Name, Kind string
	Desc       []template.HTML
}

type tagView struct {
	Name string
	Desc template.HTML
	Ops  []opView
}

type opView struct {
	ID, Method, Path, Summary string
	Desc                      []template.HTML
	Security                  []string
	Params                    []paramView
	Body                      *bodyView
	Responses                 []responseView
}

type paramView struct {
	Name, In string
	Required bool
	Type     template.HTML
	Desc     []template.HTML
}

type bodyView struct {
	Required bool
	Desc     []template.HTML
	Contents []contentView
}

type contentView struct {
	MediaType string
	Type      template.HTML
	Examples  []exampleView
}

type exampleView struct {
	Name, Summary string
	JSON          string
}

type responseView struct {
	Status   string
	Desc     []template.HTML
	Headers  []paramView
	Codes    []string
	Contents []contentView
}

type schemaView struct {
	Name   string
	Type   template.HTML
	Desc   []template.HTML
	Closed bool // additionalProperties: false
	Fields []fieldView
	Rules  []string // constraints of a non-object schema
}

type fieldView struct {
	Name     string
	Type     template.HTML
	Required bool
	Rules    []string
	Desc     []template.HTML
}

type errorView struct {
	Code, Title string
	Status      int
	Desc        []template.HTML
}

// fieldOrder is the order the YAML file lists each component schema's
// properties in (the parsed document keeps them in a map), so field tables
// and examples read like the file.
type fieldOrder map[string][]string

func loadFieldOrder() (fieldOrder, error) {
	var root struct {
		Components struct {
			Schemas map[string]struct {
				Properties yaml.Node `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(spec, &root); err != nil {
		return nil, fmt.Errorf("read property order: %w", err)
	}
	order := fieldOrder{}
	for name, sc := range root.Components.Schemas {
		for i := 0; i+1 < len(sc.Properties.Content); i += 2 {
			order[name] = append(order[name], sc.Properties.Content[i].Value)
		}
	}
	return order, nil
}

func render(doc *openapi3.T) ([]byte, error) {
	codes, err := ProblemCodes(doc)
	if err != nil {
		return nil, err
	}
	order, err := loadFieldOrder()
	if err != nil {
		return nil, err
	}
	v := pageView{Title: doc.Info.Title, Version: doc.Info.Version, Intro: prose(doc.Info.Description)}

	names := sortedKeys(doc.Components.SecuritySchemes)
	for _, n := range names {
		s := doc.Components.SecuritySchemes[n].Value
		kind := s.Type
		if s.Scheme != "" {
			kind += " " + s.Scheme
		}
		v.Security = append(v.Security, schemeView{Name: n, Kind: kind, Desc: prose(s.Description)})
	}

	byTag := map[string][]opView{}
	for _, path := range pathOrder(doc) {
		item := doc.Paths.Value(path)
		for _, m := range methodOrder {
			op := item.GetOperation(m)
			if op == nil {
				continue
			}
			tag := ""
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], order.opView(path, m, item, op))
		}
	}
	for _, t := range doc.Tags {
		ops := byTag[t.Name]
		v.Tags = append(v.Tags, tagView{Name: t.Name, Desc: inline(t.Description), Ops: ops})
		delete(byTag, t.Name)
	}
	if len(byTag) > 0 {
		return nil, fmt.Errorf("operations with a tag the document does not declare: %v", sortedKeys(byTag))
	}

	for _, n := range sortedKeys(doc.Components.Schemas) {
		v.Schemas = append(v.Schemas, order.schemaView(n, doc.Components.Schemas[n].Value))
	}
	for _, c := range codes {
		v.Errors = append(v.Errors, errorView{Code: c.Code, Title: c.Title, Status: c.Status, Desc: prose(c.Description)})
	}

	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("render /docs: %w", err)
	}
	return buf.Bytes(), nil
}

// pathOrder lists the document's paths in the order the YAML file has
// them (the parsed document keeps them in a map), so the page reads like
// the file.
func pathOrder(doc *openapi3.T) []string {
	var out []string
	for _, line := range strings.Split(string(spec), "\n") {
		if p, ok := strings.CutSuffix(line, ":"); ok && strings.HasPrefix(p, "  /") && doc.Paths.Value(p[2:]) != nil {
			out = append(out, p[2:])
		}
	}
	for _, p := range doc.Paths.InMatchingOrder() {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (order fieldOrder) opView(path, method string, item *openapi3.PathItem, op *openapi3.Operation) opView {
	o := opView{ID: op.OperationID, Method: method, Path: path, Summary: op.Summary, Desc: prose(op.Description)}
	if op.Security != nil {
		for _, req := range *op.Security {
			o.Security = append(o.Security, sortedKeys(req)...)
		}
	}
	for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
		pv := p.Value
		o.Params = append(o.Params, paramView{Name: pv.Name, In: pv.In, Required: pv.Required, Type: typeOf(pv.Schema), Desc: prose(pv.Description)})
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		o.Body = &bodyView{Required: rb.Value.Required, Desc: prose(rb.Value.Description), Contents: order.contents(rb.Value.Content)}
	}
	statuses := sortedKeys(op.Responses.Map())
	for _, st := range statuses {
		r := op.Responses.Value(st).Value
		rv := responseView{Status: st, Desc: prose(deref(r.Description)), Contents: order.contents(r.Content)}
		for _, h := range sortedKeys(r.Headers) {
			hv := r.Headers[h].Value
			rv.Headers = append(rv.Headers, paramView{Name: h, Required: hv.Required, Type: typeOf(hv.Schema), Desc: prose(hv.Description)})
		}
		for _, mt := range r.Content {
			for _, ex := range mt.Examples {
				if m, ok := ex.Value.Value.(map[string]any); ok {
					if c, ok := m["code"].(string); ok && !slices.Contains(rv.Codes, c) {
						rv.Codes = append(rv.Codes, c)
					}
				}
			}
		}
		slices.Sort(rv.Codes)
		o.Responses = append(o.Responses, rv)
	}
	return o
}

func (order fieldOrder) contents(c openapi3.Content) []contentView {
	var out []contentView
	for _, mt := range sortedKeys(c) {
		m := c[mt]
		cv := contentView{MediaType: mt, Type: typeOf(m.Schema)}
		for _, name := range sortedKeys(m.Examples) {
			ex := m.Examples[name].Value
			cv.Examples = append(cv.Examples, exampleView{Name: name, Summary: ex.Summary, JSON: order.example(ex.Value, m.Schema)})
		}
		out = append(out, cv)
	}
	return out
}

func (order fieldOrder) schemaView(name string, s *openapi3.Schema) schemaView {
	sv := schemaView{Name: name, Type: typeOfSchema(s), Desc: prose(s.Description)}
	if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
		sv.Closed = true
	}
	if len(s.Properties) == 0 {
		sv.Rules = rules(s)
		return sv
	}
	for _, f := range keyOrder(order[name], s, sortedKeys(s.Properties)) {
		p := s.Properties[f]
		fv := fieldView{Name: f, Type: typeOf(p), Required: slices.Contains(s.Required, f)}
		if p.Ref == "" {
			fv.Rules = rules(p.Value)
			fv.Desc = prose(p.Value.Description)
		}
		sv.Fields = append(sv.Fields, fv)
	}
	return sv
}

// typeOf names a schema for people, linking to named schemas.
func typeOf(r *openapi3.SchemaRef) template.HTML {
	if r == nil {
		return "any"
	}
	if r.Ref != "" {
		n := r.Ref[strings.LastIndex(r.Ref, "/")+1:]
		return template.HTML(fmt.Sprintf(`<a href="#schema-%s">%s</a>`, template.HTMLEscapeString(n), template.HTMLEscapeString(n)))
	}
	return typeOfSchema(r.Value)
}

func typeOfSchema(s *openapi3.Schema) template.HTML {
	var t template.HTML
	switch {
	case len(s.OneOf) > 0:
		var parts []string
		for _, o := range s.OneOf {
			parts = append(parts, string(typeOf(o)))
		}
		t = template.HTML("one of " + strings.Join(parts, ", "))
	case s.Type.Is("array"):
		t = "array of " + typeOf(s.Items)
	case s.Type != nil && len(s.Type.Slice()) > 0:
		t = template.HTML(template.HTMLEscapeString(strings.Join(s.Type.Slice(), " | ")))
		if s.Format != "" {
			t += template.HTML(" (" + template.HTMLEscapeString(s.Format) + ")")
		}
	default:
		t = "any"
	}
	if s.Nullable {
		t += " | null"
	}
	return t
}

// rules lists a schema's constraints in words.
func rules(s *openapi3.Schema) []string {
	var out []string
	if len(s.Enum) > 0 {
		var vals []string
		for _, e := range s.Enum {
			b, _ := json.Marshal(e)
			vals = append(vals, string(b))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if s.MinLength > 0 {
		out = append(out, fmt.Sprintf("at least %d characters", s.MinLength))
	}
	if s.MaxLength != nil {
		out = append(out, fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	if s.Pattern != "" {
		out = append(out, "matches "+visible(s.Pattern))
	}
	if s.Min != nil {
		out = append(out, "at least "+strconv.FormatFloat(*s.Min, 'f', -1, 64))
	}
	if s.Max != nil {
		out = append(out, "at most "+strconv.FormatFloat(*s.Max, 'f', -1, 64))
	}
	if s.MinItems > 0 {
		out = append(out, fmt.Sprintf("at least %d items", s.MinItems))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("at most %d items", *s.MaxItems))
	}
	return out
}

// visible spells out the characters of a pattern that a reader could not
// see (whitespace, controls, non-ASCII) as \u{…}.
func visible(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			fmt.Fprintf(&b, `\u{%04X}`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// example is an example as indented JSON, object keys in the order the
// file lists the schema's properties, so examples read like responses.
func (order fieldOrder) example(v any, s *openapi3.SchemaRef) string {
	if str, ok := v.(string); ok && (s == nil || s.Value == nil || s.Value.Type.Is("string")) {
		return str
	}
	var b strings.Builder
	order.writeJSON(&b, v, s, "")
	return b.String()
}

func (order fieldOrder) writeJSON(b *strings.Builder, v any, s *openapi3.SchemaRef, indent string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		s = variantOf(s, x)
		keys := keyOrder(order[refName(s)], schemaOf(s), sortedKeys(x))
		b.WriteString("{\n")
		for i, k := range keys {
			kb, _ := json.Marshal(k)
			b.WriteString(indent + "  " + string(kb) + ": ")
			order.writeJSON(b, x[k], propertyOf(s, k), indent+"  ")
			if i < len(keys)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(indent + "}")
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		var items *openapi3.SchemaRef
		if sc := schemaOf(s); sc != nil {
			items = sc.Items
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(indent + "  ")
			order.writeJSON(b, e, items, indent+"  ")
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(indent + "]")
	default:
		enc, _ := json.Marshal(x)
		b.Write(enc)
	}
}

func schemaOf(s *openapi3.SchemaRef) *openapi3.Schema {
	if s == nil {
		return nil
	}
	return s.Value
}

// propertyOf finds the schema of member k: in s itself, or in the first of
// its oneOf variants that has it.
func propertyOf(s *openapi3.SchemaRef, k string) *openapi3.SchemaRef {
	sc := schemaOf(s)
	if sc == nil {
		return nil
	}
	if p, ok := sc.Properties[k]; ok {
		return p
	}
	for _, o := range sc.OneOf {
		if p, ok := o.Value.Properties[k]; ok {
			return p
		}
	}
	return nil
}

// variantOf is the oneOf variant of s that v matches, or s.
func variantOf(s *openapi3.SchemaRef, v any) *openapi3.SchemaRef {
	sc := schemaOf(s)
	if sc == nil {
		return s
	}
	for _, o := range sc.OneOf {
		if o.Value.VisitJSON(v) == nil {
			return o
		}
	}
	return s
}

func refName(s *openapi3.SchemaRef) string {
	if s == nil || s.Ref == "" {
		return ""
	}
	return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
}

// keyOrder orders keys as the file lists them (order), else as s lists
// them in required, the rest alphabetically after them.
func keyOrder(order []string, s *openapi3.Schema, keys []string) []string {
	if len(order) == 0 && s != nil {
		order = s.Required
	}
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	out := slices.Clone(keys)
	slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	return out
}

// prose turns a description into blocks: paragraphs, and lists where
// every line of a paragraph starts with "- "; `code` spans become <code>.
func prose(s string) []template.HTML {
	var out []template.HTML
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Split(strings.TrimSpace(p), "\n")
		if len(lines) > 0 && strings.HasPrefix(lines[0], "- ") {
			var b strings.Builder
			b.WriteString("<ul>")
			for _, l := range lines {
				if l = strings.TrimSpace(l); strings.HasPrefix(l, "- ") {
					b.WriteString("<li>" + string(inline(strings.TrimPrefix(l, "- "))) + "</li>")
				}
			}
			b.WriteString("</ul>")
			out = append(out, template.HTML(b.String()))
			continue
		}
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, "<p>"+inline(p)+"</p>")
		}
	}
	return out
}

func inline(s string) template.HTML {
	parts := strings.Split(template.HTMLEscapeString(s), "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<code>" + p + "</code>")
			continue
		}
		if i%2 == 1 {
			b.WriteString("`")
		}
		b.WriteString(p)
	}
	return template.HTML(b.String())
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var pageTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}} — API</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2330;margin:0;display:flex}
nav{position:sticky;top:0;height:100vh;overflow:auto;width:17rem;flex:none;background:#f4f6f9;border-right:1px solid #dde2ea;padding:1rem;box-sizing:border-box;font-size:13px}
nav a{display:flex;gap:.2rem;color:#1d2330;text-decoration:none;padding:1px 0;overflow-wrap:anywhere}
nav a .m{flex:none}
nav h3{font-size:12px;text-transform:uppercase;color:#667;margin:1rem 0 .2rem}
main{padding:1rem 2rem 4rem;max-width:62rem;min-width:0}
h1{margin-top:.5rem}h2{border-bottom:1px solid #dde2ea;padding-bottom:.2rem;margin-top:2.5rem}
section.op{border:1px solid #dde2ea;border-radius:6px;padding:.2rem 1rem 1rem;margin:1.2rem 0}
.m{display:inline-block;min-width:4.2rem;font-weight:700;font-family:ui-monospace,monospace}
.GET{color:#17663a}.POST{color:#1d4fa3}.PUT{color:#8a5a00}.DELETE{color:#a1262a}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px}
code{background:#f0f2f5;padding:0 .2rem;border-radius:3px}
pre{background:#f6f8fa;border:1px solid #e3e7ee;border-radius:4px;padding:.6rem;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:.4rem 0;table-layout:fixed}
td{overflow-wrap:anywhere}
col.narrow{width:8rem}col.status{width:3.5rem}
th,td{text-align:left;vertical-align:top;border-bottom:1px solid #eceff4;padding:.25rem .5rem}
th{font-size:12px;color:#556;font-weight:600}
.req{color:#a1262a;font-size:12px}.muted{color:#667;font-size:13px}
.status{font-weight:700;font-family:ui-monospace,monospace}
details{margin:.3rem 0}summary{cursor:pointer}
.rules{color:#445;font-size:13px}
td p{margin:.15rem 0}
</style>
</head>
<body>
<nav>
<strong>{{.Title}} {{.Version}}</strong>
<p><a href="/openapi.yaml">openapi.yaml</a></p>
<h3>Overview</h3>
<a href="#authentication">Authentication</a>
<a href="#errors">Errors</a>
{{range .Tags}}<h3>{{.Name}}</h3>{{range .Ops}}<a href="#op-{{.ID}}"><span class="m {{.Method}}">{{.Method}}</span>{{.Path}}</a>{{end}}{{end}}
<h3>Schemas</h3>
{{range .Schemas}}<a href="#schema-{{.Name}}">{{.Name}}</a>{{end}}
</nav>
<main>
<h1>{{.Title}} <span class="muted">{{.Version}}</span></h1>
<p class="muted">The OpenAPI 3 document is at <a href="/openapi.yaml">/openapi.yaml</a>; this page is rendered from it.</p>
{{range .Intro}}{{.}}{{end}}

<h2 id="authentication">Authentication</h2>
{{range .Security}}<h3 id="auth-{{.Name}}">{{.Name}} <span class="muted">({{.Kind}})</span></h3>{{range .Desc}}{{.}}{{end}}{{end}}

{{range .Tags}}
<h2 id="tag-{{.Name}}">{{.Name}}</h2>
<p>{{.Desc}}</p>
{{range .Ops}}
<section class="op" id="op-{{.ID}}">
<h3><span class="m {{.Method}}">{{.Method}}</span><span class="mono">{{.Path}}</span></h3>
<p><strong>{{.Summary}}</strong> <span class="muted">operationId <code>{{.ID}}</code>{{if .Security}} · auth {{range $i, $s := .Security}}{{if $i}}, {{end}}<a href="#auth-{{$s}}">{{$s}}</a>{{end}}{{else}} · no auth{{end}}</span></p>
{{range .Desc}}{{.}}{{end}}
{{if .Params}}<h4>Parameters</h4>
<table><col class="narrow"><col style="width:5rem"><col class="narrow"><col><tr><th>name</th><th>in</th><th>type</th><th>description</th></tr>
{{range .Params}}<tr><td class="mono">{{.Name}}{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{range .Desc}}{{.}}{{end}}</td></tr>{{end}}
</table>{{end}}
{{with .Body}}<h4>Request body{{if .Required}} <span class="req">required</span>{{end}}</h4>
{{range .Desc}}{{.}}{{end}}
{{range .Contents}}<p><code>{{.MediaType}}</code>: {{.Type}}</p>
{{range .Examples}}<details><summary>example {{.Name}}{{if .Summary}} — {{.Summary}}{{end}}</summary><pre>{{.JSON}}</pre></details>{{end}}{{end}}{{end}}
<h4>Responses</h4>
<table><col class="status"><col><tr><th>status</th><th>description</th></tr>
{{range .Responses}}<tr><td class="status">{{.Status}}</td><td>
{{range .Desc}}{{.}}{{end}}
{{if .Codes}}<p class="muted">codes: {{range $i, $c := .Codes}}{{if $i}}, {{end}}<a href="#error-{{$c}}">{{$c}}</a>{{end}}</p>{{end}}
{{if .Headers}}<p class="muted">headers: {{range $i, $h := .Headers}}{{if $i}}; {{end}}<code>{{$h.Name}}</code> {{$h.Type}}{{if $h.Required}} (always){{end}}{{end}}</p>{{end}}
{{range .Contents}}<p><code>{{.MediaType}}</code>: {{.Type}}</p>
{{range .Examples}}<details><summary>example {{.Name}}{{if .Summary}} — {{.Summary}}{{end}}</summary><pre>{{.JSON}}</pre></details>{{end}}{{end}}
</td></tr>{{end}}
</table>
</section>
{{end}}{{end}}

<h2 id="errors">Errors</h2>
<p>Every error is an RFC 9457 problem document (<code>application/problem+json</code>) with <code>success: false</code>, a stable <code>code</code>, <code>requestId</code> and, for invalid fields, <code>errors: [{field, message}]</code>. Its <code>type</code> is <code>/docs#error-&lt;code&gt;</code>, which links here. See <a href="#schema-Problem">Problem</a>.</p>
{{range .Errors}}<section id="error-{{.Code}}">
<h3><code>{{.Code}}</code> <span class="muted">{{.Status}} {{.Title}}</span></h3>
{{range .Desc}}{{.}}{{end}}
</section>{{end}}

<h2 id="schemas">Schemas</h2>
{{range .Schemas}}<section id="schema-{{.Name}}">
<h3>{{.Name}} <span class="muted">{{.Type}}{{if .Closed}}, no other members{{end}}</span></h3>
{{range .Desc}}{{.}}{{end}}
{{if .Rules}}<p class="rules">{{range $i, $r := .Rules}}{{if $i}}; {{end}}{{$r}}{{end}}</p>{{end}}
{{if .Fields}}<table><col style="width:10rem"><col style="width:9rem"><col style="width:14rem"><col><tr><th>member</th><th>type</th><th>rules</th><th>description</th></tr>
{{range .Fields}}<tr><td class="mono">{{.Name}}{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.Type}}</td><td class="rules">{{range $i, $r := .Rules}}{{if $i}}; {{end}}<span class="mono">{{$r}}</span>{{end}}</td><td>{{range .Desc}}{{.}}{{end}}</td></tr>{{end}}
</table>{{end}}
</section>{{end}}
</main>
</body>
</html>
`))
