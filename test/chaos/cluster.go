package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"time"

	msgevents "github.com/msgapi/msgapi/events"
)

// Settings of every process: short windows and leases, so that a minute
// holds many expiries. The key lease and the shutdown timeout must exceed
// send timeout + dedup wait + the store budget (start-up says 18 s with
// these); the window must outlast a logical message's requests (see the
// package comment).
const (
	dedupWindow  = 45 * time.Second
	dedupLease   = time.Second
	dedupWait    = time.Second
	sendTimeout  = 2 * time.Second
	storeOp      = time.Second
	keyLease     = 20 * time.Second
	sweepEvery   = time.Second
	outcomeAfter = sendTimeout + time.Second // send timeout + MSGAPI_OUTCOME_MARGIN
)

func processEnv() []string {
	return []string{
		"MSGAPI_ENV=test",
		"MSGAPI_DEDUP_WINDOW=" + dedupWindow.String(),
		"MSGAPI_DEDUP_LEASE=" + dedupLease.String(),
		"MSGAPI_DEDUP_WAIT=" + dedupWait.String(),
		"MSGAPI_SEND_TIMEOUT=" + sendTimeout.String(),
		"MSGAPI_STORE_OP_TIMEOUT=" + storeOp.String(),
		"MSGAPI_IDEMPOTENCY_LEASE=" + keyLease.String(),
		"MSGAPI_SHUTDOWN_TIMEOUT=" + keyLease.String(),
		"MSGAPI_SWEEP_INTERVAL=" + sweepEvery.String(),
		"MSGAPI_OUTCOME_MARGIN=" + (outcomeAfter - sendTimeout).String(),
		"MSGAPI_REAPER_INTERVAL=5s",
		"MSGAPI_STORE_TIMEOUT=60s",
		"MSGAPI_LOG_LEVEL=warn",
		"MSGAPI_SENDER_SMS=webhook",
		"MSGAPI_RATE_LIMIT=0", // the clients are one workspace: no 429s from the rate limit
	}
}

// cluster is N msgapi processes on one store: process 0 runs the embedded
// engine on a loopback TCP port (MSGAPI_EMBEDDED_ADDR), the others attach
// to it with MONGODB_URI. Each keeps its HTTP address across restarts.
type cluster struct {
	dir, bin   string
	storeAddr  string
	admin, key string
	webhookURL string
	secret     string
	unfenced   bool
	onStoreErr string
	procs      []*proc

	faultLog      io.Writer
	mu            sync.Mutex
	startFailures int
}

// proc is one msgapi process slot.
type proc struct {
	i      int
	addr   string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan error
	offset time.Duration // MSGAPI_TEST_CLOCK_OFFSET of the running process
	paused bool
}

func (p *proc) url() string { return "http://" + p.addr }

// buildBinary builds ./cmd/msgapi once into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.New("run chaos from inside the msgapi module (go run ./test/chaos)")
	}
	bin := filepath.Join(dir, "msgapi")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/msgapi")
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/msgapi: %v\n%s", err, out)
	}
	return bin, nil
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func newCluster(ctx context.Context, dir, bin string, n int, webhookURL, secret string, unfenced bool, onStoreErr string) (*cluster, error) {
	c := &cluster{dir: dir, bin: bin, webhookURL: webhookURL, secret: secret, unfenced: unfenced, onStoreErr: onStoreErr, admin: randomHex(16), faultLog: io.Discard}
	var err error
	if c.storeAddr, err = freeLoopbackAddr(); err != nil {
		return nil, err
	}
	for i := range n {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, &proc{i: i, addr: addr})
	}
	for _, p := range c.procs {
		if err := c.start(ctx, p, 0); err != nil {
			c.stopAll()
			return nil, err
		}
		if p.i == 0 {
			if c.key, err = createWorkspace(ctx, p.url(), c.admin); err != nil {
				c.stopAll()
				return nil, err
			}
		}
	}
	return c, nil
}

// start runs the process of slot p with the given clock offset and waits
// until it is ready. A start-up that fails (its store calls time out while
// the machine is loaded or the engine's host restarts) is retried, as a
// supervisor would, up to five times.
func (c *cluster) start(ctx context.Context, p *proc, offset time.Duration) error {
	var err error
	for try := range 5 {
		if err = c.startOnce(ctx, p, offset); err == nil || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(c.faultLog, "%s %-32s process %d, try %d: %v\n", time.Now().Format("15:04:05.000"), "start-up failed", p.i, try+1, firstLine(err))
		c.mu.Lock()
		c.startFailures++
		c.mu.Unlock()
		c.kill(p) // if it still runs, unready
		sleepCtx(ctx, time.Second)
	}
	return err
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func (c *cluster) startOnce(ctx context.Context, p *proc, offset time.Duration) error {
	env := append(processEnv(),
		"PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"),
		"MSGAPI_ADDR="+p.addr,
		"MSGAPI_ADMIN_TOKEN="+c.admin,
		"MSGAPI_WEBHOOK_URL="+c.webhookURL,
		"MSGAPI_WEBHOOK_SECRET="+c.secret,
		"MSGAPI_TEST_CLOCK_OFFSET="+offset.String(),
		"MSGAPI_DEDUP_ON_STORE_ERROR="+c.onStoreErr,
	)
	if c.unfenced {
		env = append(env, "MSGAPI_TEST_UNFENCED=1")
	}
	if p.i == 0 {
		env = append(env, "MSGAPI_DATA_DIR="+filepath.Join(c.dir, "data"), "MSGAPI_EMBEDDED_ADDR="+c.storeAddr)
	} else {
		env = append(env, "MONGODB_URI=mongodb://"+c.storeAddr+"/")
	}
	logFile, err := os.OpenFile(c.logPath(p), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	fmt.Fprintf(logFile, "=== chaos: start process %d, clock offset %s, %s\n", p.i, offset, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, "serve")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start msgapi %d: %w", p.i, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.mu.Lock()
	p.cmd, p.done, p.offset, p.paused = cmd, done, offset, false
	p.mu.Unlock()
	return c.waitReady(ctx, p, done, 90*time.Second)
}

func (c *cluster) logPath(p *proc) string {
	return filepath.Join(c.dir, fmt.Sprintf("msgapi-%d.log", p.i))
}

func (c *cluster) waitReady(ctx context.Context, p *proc, done chan error, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		res, err := http.Get(p.url() + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("msgapi %d exited during start-up (%v):\n%s", p.i, err, c.logTail(p))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("msgapi %d /readyz not 200 within %s:\n%s", p.i, within, c.logTail(p))
}

// kill ends p's process with SIGKILL (after SIGCONT, if it was paused).
func (c *cluster) kill(p *proc) {
	p.mu.Lock()
	cmd, done, paused := p.cmd, p.done, p.paused
	p.cmd, p.paused = nil, false
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	<-done
}

// pause and resume: SIGSTOP and SIGCONT.
func (c *cluster) pause(p *proc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.paused {
		return false
	}
	p.paused = p.cmd.Process.Signal(syscall.SIGSTOP) == nil
	return p.paused
}

func (c *cluster) resume(p *proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// stopAll ends every process gracefully (SIGTERM), killing what has not
// exited within the shutdown timeout and a margin.
func (c *cluster) stopAll() {
	var wg sync.WaitGroup
	for _, p := range c.procs {
		c.resume(p)
		p.mu.Lock()
		cmd, done := p.cmd, p.done
		p.cmd = nil
		p.mu.Unlock()
		if cmd == nil {
			continue
		}
		wg.Go(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(keyLease + 10*time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	wg.Wait()
}

func (c *cluster) logTail(p *proc) string {
	b, _ := os.ReadFile(c.logPath(p))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func createWorkspace(ctx context.Context, base, admin string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/workspaces", strings.NewReader(`{"name":"chaos"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var v struct {
		APIKey string `json:"apiKey"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &v) != nil || v.APIKey == "" {
		return "", fmt.Errorf("create workspace: %d %s", res.StatusCode, body)
	}
	return v.APIKey, nil
}

// scanLogs reads the processes' logs (warn and above) for what the faults
// did inside msgapi: the count of each event, and the messages sent
// without duplicate protection because their lock could not be written
// (message.api.duplicate_guard_error).
func (c *cluster) scanLogs() (events map[string]int, unguarded map[string]bool, err error) {
	events, unguarded = map[string]int{}, map[string]bool{}
	for _, p := range c.procs {
		f, err := os.Open(c.logPath(p))
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var e struct {
				Event     string `json:"event"`
				Message   string `json:"message"`
				MessageID string `json:"messageId"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			name := e.Event
			if name == "" {
				name = clip([]byte(e.Message))
			}
			events[name]++
			if e.Event == msgevents.DuplicateGuardError && e.MessageID != "" {
				unguarded[e.MessageID] = true
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return events, unguarded, nil
}
