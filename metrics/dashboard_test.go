package metrics

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaVars stands in for the variables Grafana substitutes before a
// query reaches Prometheus.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h", `"$workspace"`, `".*"`,
)

// Every panel of the metrics dashboard queries Prometheus with PromQL that
// parses, and every metric it names is one msgapi registers, with the
// labels the query matches on.
func TestGrafanaMetricsDashboard(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/dashboards/msgapi-metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type, Title string
			Datasource  struct{ Type, UID string }
			Targets     []struct {
				Expr       string `json:"expr"`
				Datasource struct{ Type, UID string }
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	known := registered(t)

	check := func(where, expr string) {
		e, err := parser.ParseExpr(grafanaVars.Replace(expr))
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expr, err)
			return
		}
		n := 0
		parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			names := []string{vs.Name}
			if vs.Name == "" { // {__name__=~"a|b"}
				for _, m := range vs.LabelMatchers {
					if m.Name == "__name__" {
						names = strings.Split(m.Value, "|")
					}
				}
			}
			for _, name := range names {
				n++
				labels, ok := known[name]
				if !ok {
					t.Errorf("%s: %s is not a metric msgapi registers", where, name)
					continue
				}
				for _, m := range vs.LabelMatchers {
					if m.Name != "__name__" && !labels[m.Name] {
						t.Errorf("%s: %s has no label %s", where, name, m.Name)
					}
				}
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
	}

	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		q := strings.TrimSuffix(strings.TrimPrefix(v.Query.Query, "label_values("), ")")
		sel, label, ok := strings.Cut(q, ", ")
		if !ok || q == v.Query.Query {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Query.Query)
			continue
		}
		check("variable "+v.Name, sel)
		e, _ := parser.ParseExpr(sel)
		for _, m := range e.(*parser.VectorSelector).LabelMatchers {
			for _, name := range strings.Split(m.Value, "|") {
				if m.Name == "__name__" && !known[name][label] {
					t.Errorf("variable %s: %s has no label %s", v.Name, name, label)
				}
			}
		}
	}
	if !vars["workspace"] {
		t.Error("the dashboard has no workspace variable")
	}

	queries, usesWorkspace := 0, false
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "prometheus" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d queries; want Prometheus's", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			queries++
			usesWorkspace = usesWorkspace || strings.Contains(tg.Expr, "$workspace")
			check("panel "+p.Title, tg.Expr)
		}
	}
	for _, want := range []string{"msgapi_sends_total", "msgapi_duplicates_total", "msgapi_duplicate_pending_total",
		"msgapi_rate_limited_total", "msgapi_http_request_duration_seconds_bucket", "msgapi_webhook_attempts_total",
		"msgapi_webhook_backlog", "msgapi_store_writer_busy_seconds_total"} {
		if !strings.Contains(string(b), want+"{") && !strings.Contains(string(b), want+"[") && !strings.Contains(string(b), want+")") {
			t.Errorf("no panel queries %s", want)
		}
	}
	if queries < 15 || !usesWorkspace {
		t.Errorf("%d queries, workspace variable used: %v", queries, usesWorkspace)
	}
}

// registered returns every metric name msgapi's registry exports (a
// histogram's _bucket, _sum and _count series too) with its label names,
// after one observation of each kind so that every vector has a series.
func registered(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := New(SlowestRequest(13 * time.Second))
	m.StoreWriter(func() (int64, time.Duration, time.Duration) { return 1, time.Millisecond, time.Millisecond })
	serve(newEcho(m), http.MethodGet, "/api/messages/x")
	m.Sent("sms", "sent")
	m.Duplicate("pending")
	m.Idempotency("replayed")
	m.RateLimited("/api/messages", "ws_a")
	m.WebhookAttempt("succeeded", time.Millisecond)
	m.WebhookBacklog(1, 1)
	m.StoreCommand("insert", time.Millisecond)
	m.OutcomeLost()
	m.ConsentChange("suppressed", "keyword")
	m.Suppressed("sms")
	if _, err := m.Events().Write([]byte(`{"event":"message.api.duplicate_pending","workspaceId":"ws_a"}`)); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range fams {
		labels := map[string]bool{"job": true, "instance": true}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		out[f.GetName()] = labels
		if f.GetType().String() == "HISTOGRAM" {
			bucket := map[string]bool{"le": true}
			for k := range labels {
				bucket[k] = true
			}
			out[f.GetName()+"_bucket"], out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = bucket, labels, labels
		}
	}
	return out
}
