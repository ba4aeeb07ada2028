package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// server is a msgapi process this run built and started.
type server struct {
	dir      string // temporary: binary, data folder, log
	cmd      *exec.Cmd
	done     chan error
	url      string
	key      string
	storeURI string
}

// startServer builds ./cmd/msgapi and starts it on the embedded store in a
// temporary folder, with the SMS provider posting to webhookURL, then
// creates a workspace through the admin API.
func startServer(ctx context.Context, stdout io.Writer, webhookURL, secret string, env ...string) (*server, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "msgapi-load-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir}
	bin := filepath.Join(dir, "msgapi")
	fmt.Fprintf(stdout, "building ./cmd/msgapi … ")
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/msgapi")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build ./cmd/msgapi: %v\n%s", err, out)
	}
	fmt.Fprintf(stdout, "%s\n", time.Since(start).Round(100*time.Millisecond))

	httpAddr, err := freeLoopbackAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	admin := randomHex(16)
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor

	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"MSGAPI_ADDR=" + httpAddr,
		"MSGAPI_DATA_DIR=" + filepath.Join(dir, "data"),
		"MSGAPI_ADMIN_TOKEN=" + admin,
		"MSGAPI_SENDER_SMS=webhook",
		"MSGAPI_WEBHOOK_URL=" + webhookURL,
		"MSGAPI_WEBHOOK_SECRET=" + secret,
		"MSGAPI_LOG_LEVEL=warn",
		"MSGAPI_RATE_LIMIT=0", // measure the server, not the per-workspace rate limit
	}
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start msgapi: %w", err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	s.url = "http://" + httpAddr
	// The embedded engine's Unix socket, escaped into the host part.
	s.storeURI = "mongodb://" + url.QueryEscape(filepath.Join(dir, "data", "mongodb.sock")) + "/"

	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	if err := s.createWorkspace(ctx, admin); err != nil {
		_ = s.stop()
		return nil, err
	}
	fmt.Fprintf(stdout, "msgapi %s, embedded store %s, data in %s\n", s.url, s.storeURI, filepath.Join(dir, "data"))
	return s, nil
}

// moduleRoot is the folder of the go.mod that the working directory is in.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.New("run load from inside the msgapi module (go run ./test/load)")
	}
	return filepath.Dir(gomod), nil
}

// freeLoopbackAddr asks the kernel for a free port. Another process could
// take it before msgapi binds it; then start-up fails and says so.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (s *server) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		res, err := http.Get(s.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("msgapi exited during start-up (%v):\n%s", err, s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("msgapi /readyz not 200 within %s:\n%s", within, s.logTail())
}

func (s *server) createWorkspace(ctx context.Context, admin string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/admin/workspaces", strings.NewReader(`{"name":"load"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var v struct {
		APIKey string `json:"apiKey"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &v) != nil || v.APIKey == "" {
		return fmt.Errorf("create workspace: %d %s", res.StatusCode, body)
	}
	s.key = v.APIKey
	return nil
}

// stop ends msgapi with SIGTERM (a clean shutdown), kills it if it has not
// exited within 30 s, and removes the temporary folder.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("msgapi exited with %v:\n%s", err, s.logTail())
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("msgapi did not exit within 30 s of SIGTERM; killed")
	}
}

// logTail is the end of the server's log, for error messages.
func (s *server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
