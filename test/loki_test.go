package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// victoriaLogsInstall is how CI (and a developer) gets the receiver.
const victoriaLogsInstall = "go install github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@v1.52.2"

// victoriaLogsBinary finds victoria-logs: $MSGAPI_TEST_VICTORIALOGS, PATH,
// $GOBIN, then $(go env GOPATH)/bin, where go install puts it.
func victoriaLogsBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MSGAPI_TEST_VICTORIALOGS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("MSGAPI_TEST_VICTORIALOGS=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("victoria-logs"); err == nil {
		return p
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n") // GOBIN's line may be empty
		if lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) > 1 {
			for _, gp := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "victoria-logs")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Skipf("victoria-logs not found (MSGAPI_TEST_VICTORIALOGS, PATH, %s); install it with: %s", strings.Join(dirs, ", "), victoriaLogsInstall)
	return ""
}

// victoriaLogs is a VictoriaLogs process: a real receiver of Loki's push
// protocol (/insert/loki/api/v1/push) with a LogsQL query API.
type victoriaLogs struct {
	url  string
	mu   sync.Mutex
	logs strings.Builder
}

func startVictoriaLogs(t *testing.T) *victoriaLogs {
	t.Helper()
	bin := victoriaLogsBinary(t)
	addr := freeAddr(t)
	v := &victoriaLogs{url: "http://" + addr}
	cmd := exec.Command(bin, "-httpListenAddr="+addr, "-storageDataPath="+t.TempDir(), "-loggerLevel=WARN")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			v.mu.Lock()
			v.logs.WriteString(sc.Text() + "\n")
			v.mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := http.Get(v.url + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return v
			}
		}
		select {
		case err := <-done:
			t.Fatalf("victoria-logs exited during start-up: %v\n%s", err, v.Logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("victoria-logs not healthy within 30s\n%s", v.Logs())
		}
	}
}

func (v *victoriaLogs) Logs() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.logs.String()
}

// get calls the HTTP API and returns the body; it makes what was ingested
// searchable first (force_flush: VictoriaLogs otherwise flushes every few
// seconds).
func (v *victoriaLogs) get(t *testing.T, path string, args url.Values) []byte {
	t.Helper()
	for _, p := range []string{"/internal/force_flush", path + "?" + args.Encode()} {
		res, err := http.Get(v.url + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, res.StatusCode, b)
		}
		if p != "/internal/force_flush" {
			return b
		}
	}
	panic("unreachable")
}

// counts runs a LogsQL query ending in `stats by (field) count() n` and
// returns n by field value.
func (v *victoriaLogs) counts(t *testing.T, query, field string) map[string]int {
	t.Helper()
	b := v.get(t, "/select/logsql/query", url.Values{"query": {query}})
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var row map[string]string
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("query %q: row %q: %v", query, line, err)
		}
		n, err := strconv.Atoi(row["n"])
		if err != nil {
			t.Fatalf("query %q: row %q has no count", query, line)
		}
		out[row[field]] += n
	}
	return out
}

// The events of a duplicate storm reach a real Loki-protocol receiver,
// labelled so that ops' one query answers "how many duplicates did
// workspace W have, and which mode", and the count there equals what the
// HTTP answers said.
func TestVictoriaLogsDuplicateStorm(t *testing.T) {
	vl := startVictoriaLogs(t)
	env := embeddedEnv(t, t.TempDir())
	env["MSGAPI_LOKI_URL"] = vl.url + "/insert/loki/api/v1/push"
	env["MSGAPI_ENV"] = "systest"
	p := start(t, env)
	wsID, key := p.createWorkspace(admin)

	const n = 10
	var (
		wg                     sync.WaitGroup
		gate                   = make(chan struct{})
		sent, blocked, pending atomic.Int64
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r, err := post(p.url+"/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100000","body":"One storm, one send"}`)
			if err != nil || (r.status != http.StatusOK && r.status != http.StatusCreated) {
				t.Errorf("send: %v %d %s", err, r.status, r.body)
				return
			}
			var a struct {
				DuplicateOnly bool            `json:"duplicateOnly"`
				Message       json.RawMessage `json:"message"`
			}
			if err := json.Unmarshal(r.body, &a); err != nil {
				t.Errorf("answer %s: %v", r.body, err)
				return
			}
			switch {
			case !a.DuplicateOnly:
				sent.Add(1)
			case string(a.Message) == "null":
				pending.Add(1)
			default:
				blocked.Add(1)
			}
		}()
	}
	close(gate)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if sent.Load() != 1 || blocked.Load()+pending.Load() != n-1 {
		t.Fatalf("answers: %d sent, %d blocked, %d pending; want 1 sent and %d duplicates", sent.Load(), blocked.Load(), pending.Load(), n-1)
	}

	// The same story on /metrics.
	m := p.do(http.MethodGet, "/metrics", "", "")
	for _, want := range []string{
		`msgapi_sends_total{channel="sms",outcome="sent"} 1`,
		`msgapi_http_requests_total{method="POST",route="/api/messages",status="200"} ` + strconv.Itoa(n-1),
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := metricSum(string(m.body), "msgapi_duplicates_total"); got != n-1 {
		t.Errorf("msgapi_duplicates_total sums to %v, want %d", got, n-1)
	}

	// Stopping flushes what is queued, within its time bound.
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Logs())
	}
	if strings.Contains(p.Logs(), "final flush incomplete") {
		t.Errorf("the final flush to a healthy receiver timed out:\n%s", p.Logs())
	}

	// The labels are stream fields, so {…} selects by them; the workspace
	// is a field of the line, not a label.
	sel := `{app="msgapi",env="systest"} workspaceId:="` + wsID + `"`
	var byEvent map[string]int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		byEvent = vl.counts(t, sel+` | stats by (event) count() n`, "event")
		if byEvent["message.api.sent"] >= 1 && byEvent["message.api.duplicate_blocked"]+byEvent["message.api.duplicate_pending"] >= n-1 || time.Now().After(deadline) {
			break
		}
	}
	if got, want := byEvent["message.api.duplicate_blocked"], int(blocked.Load()); got != want {
		t.Errorf("duplicate_blocked events in VictoriaLogs = %d, HTTP answers said %d (all events: %v)\nvictoria-logs:\n%s", got, want, byEvent, vl.Logs())
	}
	if got, want := byEvent["message.api.duplicate_pending"], int(pending.Load()); got != want {
		t.Errorf("duplicate_pending events = %d, HTTP answers said %d", got, want)
	}
	if got := byEvent["message.api.sent"]; got != 1 {
		t.Errorf("sent events = %d, want 1", got)
	}

	// The SPEC's ops query, in LogsQL: duplicates of workspace W by mode,
	// selected by the event label.
	byMode := vl.counts(t, `{app="msgapi",env="systest",event="message.api.duplicate_blocked"} workspaceId:="`+wsID+`" | stats by (mode) count() n`, "mode")
	total := 0
	for mode, c := range byMode {
		if mode != "lock_resolved" && mode != "lock_resolved_polled" {
			t.Errorf("mode %q (%d lines)", mode, c)
		}
		total += c
	}
	if total != int(blocked.Load()) {
		t.Errorf("by mode %v sums to %d, want %d", byMode, total, blocked.Load())
	}

	var fields struct {
		Values []struct {
			Value string `json:"value"`
		} `json:"values"`
	}
	b := vl.get(t, "/select/logsql/stream_field_names", url.Values{"query": {`{app="msgapi"}`}})
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatalf("stream_field_names %s: %v", b, err)
	}
	var names []string
	for _, f := range fields.Values {
		names = append(names, f.Value)
	}
	slices.Sort(names)
	if want := []string{"app", "env", "event", "level"}; !slices.Equal(names, want) {
		t.Errorf("stream fields = %v, want exactly %v", names, want)
	}
}

// Loki unreachable (nothing listens on the push URL): requests complete
// with their normal statuses, lines beyond the buffer are dropped and
// counted on /metrics, and shutdown is not held hostage by the flush.
func TestLokiUnreachableKeepsAnswering(t *testing.T) {
	env := embeddedEnv(t, t.TempDir())
	env["MSGAPI_LOKI_URL"] = "http://" + freeAddr(t) + "/loki/api/v1/push" // freeAddr closes its listener
	env["MSGAPI_LOKI_BUFFER"] = "20"
	env["MSGAPI_RATE_LIMIT"] = "0" // 200 sends as fast as they go: not a rate-limit test
	p := start(t, env)
	_, key := p.createWorkspace(admin)

	const requests, workers = 200, 8
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		answered atomic.Int64
	)
	finished := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= requests; i = next.Add(1) {
				r, err := post(p.url+"/api/messages", key, fmt.Sprintf(`{"channel":"sms","recipientPhone":"+15550100000","body":"message %d"}`, i))
				if err != nil || (r.status != http.StatusOK && r.status != http.StatusCreated) {
					t.Errorf("request %d: %v %d %s", i, err, r.status, r.body)
					return
				}
				answered.Add(1)
			}
		}()
	}
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(3 * time.Minute): // a hang guard, not a timing claim
		t.Fatalf("only %d of %d requests answered after 3 minutes with Loki unreachable", answered.Load(), requests)
	}
	if answered.Load() != requests {
		t.FailNow()
	}

	// The client is stuck retrying its first batch, so the 20-line queue is
	// full; every scrape logs one more line until the counter shows drops.
	var dropped float64
	for deadline := time.Now().Add(30 * time.Second); dropped == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dropped = metricSum(string(p.do(http.MethodGet, "/metrics", "", "").body), `msgapi_loki_lines_dropped_total{reason="queue_full"}`)
	}
	if dropped == 0 {
		t.Errorf("msgapi_loki_lines_dropped_total{reason=\"queue_full\"} still 0 after %d requests with Loki unreachable", requests)
	}

	if err := p.stop(); err != nil {
		t.Fatalf("stop with Loki unreachable: %v\n%s", err, p.Logs())
	}
	if !strings.Contains(p.Logs(), "final flush incomplete") {
		t.Errorf("no sign that the final flush gave up on the unreachable Loki:\n%s", tail(p.Logs(), 20))
	}
}

// post sends one JSON request with a timeout, from any goroutine.
func post(u, token, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, b}, err
}

// metricSum adds up the samples of the series whose line starts with
// prefix (a metric name, or a name with labels).
func metricSum(exposition, prefix string) float64 {
	var sum float64
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `[{ ].*?(\S+)$`)
	for _, line := range strings.Split(exposition, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			sum += f
		}
	}
	return sum
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
