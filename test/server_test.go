package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// builds are the server binaries of this test run, built once each: with
// -race when the tests run with it, and plain (plainBinary).
var builds = map[bool]*build{true: {}, false: {}}

type build struct {
	once sync.Once
	path string
	err  error
}

// binary builds cmd/msgapi once per test run.
func binary(t *testing.T) string { return buildBinary(t, raceEnabled) }

// plainBinary is cmd/msgapi built without -race, for the tests whose claims
// are about time (scheduled sends due within seconds): a race-instrumented
// server on two cores is several times slower, and its store timeouts
// would be the test's subject. Without -race it is binary.
func plainBinary(t *testing.T) string { return buildBinary(t, false) }

func buildBinary(t *testing.T, race bool) string {
	t.Helper()
	bd := builds[race]
	bd.once.Do(func() {
		dir, err := os.MkdirTemp("", "msgapi-bin-")
		if err != nil {
			bd.err = err
			return
		}
		bd.path = filepath.Join(dir, "msgapi")
		args := []string{"build", "-o", bd.path}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../cmd/msgapi")...).CombinedOutput()
		if err != nil {
			bd.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if bd.err != nil {
		t.Fatal(bd.err)
	}
	return bd.path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is one running msgapi process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
	// publicURL is the origin vendors were given (MSGAPI_PUBLIC_URL), when
	// it is not url.
	publicURL string
}

func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// start runs the binary with env (on top of a minimal environment) and
// waits until /readyz answers 200.
func start(t *testing.T, env map[string]string) *proc {
	t.Helper()
	return startBinary(t, binary(t), env)
}

// startBinary is start with the binary at bin.
func startBinary(t *testing.T, bin string, env map[string]string) *proc {
	t.Helper()
	addr := env["MSGAPI_ADDR"] // a restart on the same address keeps MSGAPI_PUBLIC_URL right
	if addr == "" {
		addr = freeAddr(t)
	}
	full := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "MSGAPI_ADDR=" + addr}
	for k, v := range env {
		if k != "MSGAPI_ADDR" {
			full = append(full, k+"="+v)
		}
	}
	p := &proc{t: t, url: "http://" + addr, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = full
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { p.stop() })

	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(p.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("msgapi exited during start-up: %v\n%s", err, p.Logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 30s of start\n%s", p.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("msgapi did not exit within 30s of SIGTERM")
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return m
}

func (p *proc) do(method, path, token, body string) reply {
	p.t.Helper()
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, b}
}

func (p *proc) createWorkspace(admin string) (wsID, key string) {
	p.t.Helper()
	r := p.do(http.MethodPost, "/admin/workspaces", admin, `{"name":"Acme"}`)
	if r.status != http.StatusCreated {
		p.t.Fatalf("create workspace: %d %s", r.status, r.body)
	}
	m := r.json(p.t)
	return m["workspaceId"].(string), m["apiKey"].(string)
}
