package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheckTimeout bounds one check; the image's HEALTHCHECK allows a
// little more, so a hung server is reported by this command, not killed.
const healthcheckTimeout = 4 * time.Second

// healthcheck: msgapi healthcheck exits 0 when GET /readyz on the server at
// MSGAPI_ADDR answers 200. It is the image's HEALTHCHECK: the distroless
// runtime image has no shell and no curl.
func healthcheck(ctx context.Context, v values, stdout io.Writer) error {
	u, err := readyzURL(v.str("MSGAPI_ADDR"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s answered %s", u, res.Status)
	}
	fmt.Fprintf(stdout, "ready: GET %s answered %s\n", u, res.Status)
	return nil
}

// readyzURL is the /readyz URL of a server listening on addr; a listener on
// every interface (":8080", "0.0.0.0:8080", "[::]:8080") is asked on the
// loopback address.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("MSGAPI_ADDR=%q is not host:port: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
