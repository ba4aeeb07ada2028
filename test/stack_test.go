package test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The image and the compose stack, checked without a Docker engine (none
// runs here): what the Dockerfile lays out, what compose wires, and the
// Prometheus configuration through promtool.

// dockerfile returns the Dockerfile's instructions (continuation lines
// joined), each as "INSTRUCTION rest".
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

// runtimeUID is distroless's "nonroot" user.
const runtimeUID = 65532

func TestDockerfileImageLayout(t *testing.T) {
	ins := dockerfile(t)
	var froms []string
	var final []string // the runtime stage's instructions
	for _, in := range ins {
		if strings.HasPrefix(in, "FROM ") {
			froms = append(froms, in)
			final = nil
		}
		final = append(final, in)
	}
	digest := regexp.MustCompile(`^FROM \S+:\S+@sha256:[0-9a-f]{64}( AS \w+)?$`)
	for _, f := range froms {
		if !digest.MatchString(f) {
			t.Errorf("%q: base images are pinned by tag and digest", f)
		}
	}
	if want := "FROM golang:" + goModVersion(t) + "-"; len(froms) < 2 || !strings.HasPrefix(froms[0], want) {
		t.Errorf("the build stage is %q, want the toolchain go.mod needs (%s…)", froms[0], want)
	}
	has := func(re string) bool {
		for _, in := range final {
			if regexp.MustCompile(re).MatchString(in) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{
		`^USER nonroot(:nonroot)?$`,
		`^ENV .*\bMSGAPI_DATA_DIR=/data\b`,
		`^VOLUME \["/data"\]$`,
		`^COPY --from=build --chown=65532:65532 /out/data /data$`,
		`^COPY --from=build /out/msgapi /usr/local/bin/msgapi$`,
		`^HEALTHCHECK .*CMD \["/usr/local/bin/msgapi", "healthcheck"\]$`,
		`^ENTRYPOINT \["/usr/local/bin/msgapi"\]$`,
	} {
		if !has(want) {
			t.Errorf("the runtime stage lacks %s", want)
		}
	}
	// The data folder the runtime stage copies is made, owned by the
	// runtime user, in the build stage.
	if !slicesContainsMatch(ins, `^RUN mkdir -p /out/data && chown 65532:65532 /out/data\b`) {
		t.Error("the build stage does not create /out/data owned by 65532")
	}

	// The .dockerignore keeps the repository's history, local data and
	// secrets out of the build context, and nothing the build embeds.
	di, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(di), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ignored[strings.Trim(l, "/")] = true
		}
	}
	for _, want := range []string{".git", "data", ".env"} {
		if !ignored[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	out, err := exec.Command("go", "list", "-f", `{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("..")
	for _, f := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(root, f)
		if top := strings.Split(rel, string(filepath.Separator))[0]; ignored[top] || ignored[rel] {
			t.Errorf("%s is embedded by the build but excluded by .dockerignore", rel)
		}
	}
}

func slicesContainsMatch(l []string, re string) bool {
	for _, s := range l {
		if regexp.MustCompile(re).MatchString(s) {
			return true
		}
	}
	return false
}

// The image's layout, run for real: the binary as the runtime user (uid
// 65532, not root) with MSGAPI_DATA_DIR a folder that user owns, as the
// Dockerfile makes /data, starts the embedded engine and answers ready.
func TestImageLayoutRunsAsRuntimeUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running as uid 65532 needs root (CI runs as root)")
	}
	root, err := os.MkdirTemp("", "msgapi-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "msgapi")
	src, _ := os.ReadFile(binary(t))
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, runtimeUID, runtimeUID); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"MSGAPI_ADDR=" + addr, "MSGAPI_DATA_DIR=" + data, "MSGAPI_EMBEDDED_ADDR=" + freeAddr(t), "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: runtimeUID, Gid: runtimeUID}}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("msgapi as uid %d exited: %v\n%s", runtimeUID, err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready as uid %d within 30s\n%s", runtimeUID, logs.String())
		}
	}
	entries, _ := os.ReadDir(data)
	if len(entries) == 0 {
		t.Error("the engine wrote nothing to the data folder")
	}
	// The image's HEALTHCHECK command, as the runtime user.
	hc := exec.Command(bin, "healthcheck")
	hc.Env = []string{"MSGAPI_ADDR=" + addr}
	hc.SysProcAttr = cmd.SysProcAttr
	if out, err := hc.CombinedOutput(); err != nil {
		t.Errorf("msgapi healthcheck: %v\n%s", err, out)
	}
}

type composeService struct {
	Image       string            `yaml:"image"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

func readCompose(t *testing.T) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Services
}

func TestComposeStack(t *testing.T) {
	svc := readCompose(t)
	for _, name := range []string{"mongo", "msgapi", "loki", "prometheus", "grafana"} {
		s, ok := svc[name]
		if !ok {
			t.Errorf("service %s missing", name)
			continue
		}
		if len(s.Healthcheck.Test) < 2 || (s.Healthcheck.Test[0] != "CMD" && s.Healthcheck.Test[0] != "CMD-SHELL") {
			t.Errorf("service %s has no healthcheck", name)
		}
		if s.Image != "" && !regexp.MustCompile(`^\S+:\S+@sha256:[0-9a-f]{64}$`).MatchString(s.Image) {
			t.Errorf("service %s: image %q is not pinned by digest", name, s.Image)
		}
	}
	// msgapi starts once Mongo is a writable primary of its replica set.
	app := svc["msgapi"]
	if app.DependsOn["mongo"].Condition != "service_healthy" || app.DependsOn["loki"].Condition != "service_healthy" {
		t.Errorf("msgapi depends_on %+v, want mongo and loki healthy", app.DependsOn)
	}
	mongoCheck := strings.Join(svc["mongo"].Healthcheck.Test, " ")
	for _, want := range []string{"db.hello().isWritablePrimary", "rs.initiate(", "quit(1)"} {
		if !strings.Contains(mongoCheck, want) {
			t.Errorf("mongo's healthcheck lacks %s: %s", want, mongoCheck)
		}
	}
	if got := strings.Join(app.Healthcheck.Test, " "); got != "CMD /usr/local/bin/msgapi healthcheck" {
		t.Errorf("msgapi's healthcheck is %q", got)
	}
	// Docker waits past the shutdown timeout and the last Loki flush (5 s)
	// before its SIGKILL.
	shutdown, err := time.ParseDuration(app.Environment["MSGAPI_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("compose sets no MSGAPI_SHUTDOWN_TIMEOUT: %v", err)
	}
	grace, err := time.ParseDuration(app.StopGracePeriod)
	if err != nil || grace <= shutdown+5*time.Second {
		t.Errorf("stop_grace_period %q, want more than %v + 5s", app.StopGracePeriod, shutdown)
	}
	// Operators' consoles listen on loopback only.
	for _, name := range []string{"loki", "prometheus", "grafana"} {
		for _, p := range svc[name].Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond 127.0.0.1", name, p)
			}
		}
	}
	// Secrets come from .env (ignored by git; .env.example names them).
	example, _ := os.ReadFile("../.env.example")
	gitignore, _ := os.ReadFile("../.gitignore")
	if !regexp.MustCompile(`(?m)^/?\.env$`).Match(gitignore) {
		t.Error(".gitignore does not ignore .env")
	}
	for svcName, key := range map[string]string{"msgapi": "MSGAPI_ADMIN_TOKEN", "grafana": "GF_SECURITY_ADMIN_PASSWORD"} {
		v := svc[svcName].Environment[key]
		m := regexp.MustCompile(`^\$\{(\w+):\?[^}]+\}$`).FindStringSubmatch(v)
		if m == nil {
			t.Errorf("%s: %s=%q is not read from .env (${VAR:?message})", svcName, key, v)
			continue
		}
		if !regexp.MustCompile(`(?m)^` + m[1] + `=`).Match(example) {
			t.Errorf(".env.example does not name %s", m[1])
		}
	}

	// Prometheus scrapes msgapi's /metrics and loads the rules.
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "../deploy/prometheus/prometheus.yml", &prom)
	if len(prom.ScrapeConfigs) != 1 || prom.ScrapeConfigs[0].MetricsPath != "/metrics" ||
		len(prom.ScrapeConfigs[0].StaticConfigs) != 1 || strings.Join(prom.ScrapeConfigs[0].StaticConfigs[0].Targets, ",") != "msgapi:8080" {
		t.Errorf("prometheus.yml does not scrape msgapi:8080/metrics: %+v", prom.ScrapeConfigs)
	}
	if !slicesContainsMatch(svc["prometheus"].Volumes, `^\./deploy/prometheus:/etc/prometheus(:ro)?$`) {
		t.Errorf("prometheus does not mount deploy/prometheus: %v", svc["prometheus"].Volumes)
	}
	for _, f := range prom.RuleFiles {
		if _, err := os.Stat(filepath.Join("../deploy/prometheus", f)); err != nil {
			t.Errorf("rule file %s: %v", f, err)
		}
	}

	// Grafana has both data sources, at the services' addresses.
	var ds struct {
		Datasources []struct {
			Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, "../deploy/grafana/provisioning/datasources/datasources.yaml", &ds)
	got := map[string]string{}
	for _, d := range ds.Datasources {
		got[d.Type] = d.URL
	}
	if got["loki"] != "http://loki:3100" || got["prometheus"] != "http://prometheus:9090" {
		t.Errorf("grafana data sources %v, want loki and prometheus", got)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promtool is Debian's prometheus package's; .ci/run installs it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no promtool: .ci/run installs Debian's prometheus package")
		}
		t.Skip("no promtool on PATH (apt-get install prometheus)")
	}
	return p
}

// The rules and the configuration pass promtool; the rules' unit tests
// (rules_test.yml) fire each alert on the series msgapi exports; a real
// scrape of a running msgapi passes promtool's metrics lint and has every
// metric the rules query.
func TestPromtool(t *testing.T) {
	pt := promtool(t)
	for _, args := range [][]string{
		{"check", "config", "../deploy/prometheus/prometheus.yml"},
		{"check", "rules", "../deploy/prometheus/rules.yml"},
		{"test", "rules", "../deploy/prometheus/rules_test.yml"},
	} {
		if out, err := exec.Command(pt, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	p := start(t, embeddedEnv(t, t.TempDir()))
	_, key := p.createWorkspace(admin)
	p.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100000","body":"scrape me"}`)
	res, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(res.Body)
	res.Body.Close()
	lint := exec.Command(pt, "check", "metrics")
	lint.Stdin = bytes.NewReader(scrape)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on a scrape of msgapi: %v\n%s", err, out)
	}

	rules, _ := os.ReadFile("../deploy/prometheus/rules.yml")
	queried := regexp.MustCompile(`\bmsgapi_[a-z_]+`).FindAllString(string(rules), -1)
	sort.Strings(queried)
	if len(queried) < 5 {
		t.Fatalf("the rules query %v", queried)
	}
	// A labelled counter shows in a scrape once it has a series; until
	// then its definition in package metrics counts.
	defined, _ := os.ReadFile("../metrics/metrics.go")
	for _, m := range queried {
		exported := false
		// A histogram's series are its name plus _bucket, _sum or _count.
		for _, name := range []string{m, strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")} {
			exported = exported || regexp.MustCompile(`(?m)^# TYPE `+name+` `).Match(scrape) || bytes.Contains(defined, []byte(`"`+name+`"`))
		}
		if !exported {
			t.Errorf("the rules query %s, which msgapi does not export", m)
		}
	}
}

// Every alert in rules.yml has a unit test in rules_test.yml that sees it
// fire and one that sees it stay quiet: an alert without the first may
// never fire, one without the second may always fire.
func TestAlertRulesTestedFiringAndQuiet(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "../deploy/prometheus/rules.yml", &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "../deploy/prometheus/rules_test.yml", &tests)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, c := range g.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !firing[r.Alert] {
				t.Errorf("rules_test.yml never sees %s fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("rules_test.yml never sees %s stay quiet", r.Alert)
			}
		}
	}
	if n < 11 {
		t.Errorf("rules.yml has %d alerts", n)
	}
}
