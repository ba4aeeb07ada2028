package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed client is what oapi-codegen makes of the committed
// document: regenerate it into a temporary file and compare.
func TestClientUpToDate(t *testing.T) {
	cfg, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "client.gen.go")
	cfg = bytes.Replace(cfg, []byte("output: client.gen.go"), []byte("output: "+out), 1)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", cfgPath, filepath.Join("..", "..", "openapi", "openapi.yaml"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile("client.gen.go")
	if !bytes.Equal(got, want) {
		t.Error("test/client/client.gen.go is stale: run go generate ./test/client")
	}
}
