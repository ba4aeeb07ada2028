package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/msgapi/msgapi/events"
)

// No Docker engine runs where these tests run, so the compose file and the
// Dockerfile are checked for what can be checked without one: they build
// the same cmd/msgapi, statically, and configure it with settings it has.

func TestDockerfileBuildsTheStaticBinary(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(string(df))
	if build == nil || !strings.HasSuffix(build[1], " ./cmd/msgapi") {
		t.Fatalf("the Dockerfile does not build ./cmd/msgapi with CGO_ENABLED=0: %v", build)
	}
	if !strings.Contains(string(df), "USER nonroot") {
		t.Error("the image does not run as non-root")
	}
	// The same package graph here without cgo: every dependency resolves
	// and none needs cgo, so the binary is static. (go list, not go build:
	// a second full compile of the engine would double CI time.)
	cmd := exec.Command("go", "list", "-e", "-deps", "-f", "{{.ImportPath}}|{{len .CgoFiles}}|{{if .Error}}{{.Error}}{{end}}", "./cmd/msgapi")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 go list ./cmd/msgapi: %v\n%s", err, b)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, "|", 3)
		pkgs++
		if f[0] == "runtime/cgo" || f[1] != "0" || strings.TrimSpace(f[2]) != "" {
			t.Errorf("without cgo: %s", line)
		}
	}
	if pkgs < 100 {
		t.Errorf("go list saw only %d packages", pkgs)
	}
}

func TestComposeConfiguresKnownSettings(t *testing.T) {
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build       any               `yaml:"build"`
			Image       string            `yaml:"image"`
			Command     any               `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"mongo", "msgapi", "loki", "grafana"} {
		if _, ok := compose.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	app := compose.Services["msgapi"]
	if app.Build != "." {
		t.Errorf("msgapi is built from %v, want . (the Dockerfile)", app.Build)
	}
	// Every variable given to msgapi is one of its settings.
	usage, err := exec.Command(binary(t), "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("msgapi serve -h: %v\n%s", err, usage)
	}
	for k := range app.Environment {
		if !strings.Contains(string(usage), k) {
			t.Errorf("compose sets %s, which msgapi does not read", k)
		}
	}
	if !strings.Contains(app.Environment["MONGODB_URI"], "replicaSet=rs0") {
		t.Errorf("MONGODB_URI %q does not name the replica set", app.Environment["MONGODB_URI"])
	}
	if !strings.Contains(strings.Join(toStrings(compose.Services["mongo"].Command), " "), "--replSet rs0") {
		t.Error("mongo does not run as replica set rs0")
	}
	// Grafana's provisioning folders exist as mounted.
	for _, v := range compose.Services["grafana"].Volumes {
		src := strings.SplitN(v, ":", 2)[0]
		if _, err := os.Stat(filepath.Join("..", src)); err != nil {
			t.Errorf("grafana volume %s: %v", src, err)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, e.(string))
		}
	}
	return out
}

// The dashboard parses and queries only event names msgapi emits.
func TestGrafanaDashboardQueriesKnownEvents(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/dashboards/msgapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, e := range []string{events.DuplicateBlocked, events.DuplicatePending, events.DuplicateGuardError, events.Sent, events.SendFailed, events.IdempotentReplay, events.IdempotencyConflict} {
		known[e] = true
	}
	seen := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range regexp.MustCompile(`message\.api\.[a-z_]+`).FindAllString(tg.Expr, -1) {
				seen++
				if !known[m] {
					t.Errorf("panel %q queries unknown event %s", p.Title, m)
				}
			}
		}
	}
	if len(dash.Panels) < 4 || seen == 0 {
		t.Errorf("%d panels querying %d event names", len(dash.Panels), seen)
	}
}
