package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckRefusesSpecialAddresses(t *testing.T) {
	d := New(Options{})
	for _, a := range []string{
		"127.0.0.1", "127.5.5.5", "::1", "0.0.0.0", "::", "255.255.255.255",
		"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "fc00::1", "fd12:3456::1",
		"169.254.169.254", "169.254.0.1", "fe80::1", "100.64.0.1", "100.100.100.200",
		"224.0.0.1", "239.1.1.1", "ff02::1", "ff05::2",
		"fd00:ec2::254", "192.0.0.192", "192.0.2.1", "198.18.0.1", "240.0.0.1",
		// IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms of refused addresses
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b:1::1",
		"2002:7f00:1::1", "2002:a9fe:a9fe::1", "2001::1", "2001:db8::1",
	} {
		if r := d.Check(netip.MustParseAddr(a), false); r == "" {
			t.Errorf("Check(%s) allowed, want refused", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8", "2002:808:808::1"} {
		if r := d.Check(netip.MustParseAddr(a), false); r != "" {
			t.Errorf("Check(%s) = %q, want allowed", a, r)
		}
	}
}

func TestCheckHostRefusesLiteralsAndLocalhostNames(t *testing.T) {
	d := New(Options{})
	for _, h := range []string{"localhost", "localhost.", "LOCALHOST", "api.localhost", "127.0.0.1", "[::1]", "::ffff:127.0.0.1",
		"127.1", "0x7f000001", "2130706433", "0177.0.0.1", "fe80::1%eth0", "169.254.169.254", "[::]", "0"} {
		if r := d.CheckHost(h); r == "" {
			t.Errorf("CheckHost(%q) allowed, want refused", h)
		}
	}
	for _, h := range []string{"hooks.example.com", "8.8.8.8", "[2606:4700:4700::1111]", "localhost.example.com"} {
		if r := d.CheckHost(h); r != "" {
			t.Errorf("CheckHost(%q) = %q, want allowed", h, r)
		}
	}
	if r := New(Options{AllowLoopback: true}).CheckHost("localhost"); r != "" {
		t.Errorf("with AllowLoopback, CheckHost(localhost) = %q", r)
	}
}

// far is a loopback server that counts what it got.
func far(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64, string) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, &n, u.Port()
}

// resolveTo answers every name with addrs, counting lookups.
func resolveTo(n *atomic.Int64, addrs ...string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		n.Add(1)
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "inside") }

// A public-looking name that resolves to loopback (or to a mapped form of
// it) is refused at connect time, and the far side never hears of it.
func TestNameResolvingToLoopbackIsRefused(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "::ffff:127.0.0.1"} {
		_, hits, port := far(t, ok)
		var lookups atomic.Int64
		c := New(Options{Lookup: resolveTo(&lookups, addr)}).Client(5 * time.Second)
		_, err := c.Get("http://hooks.example.com:" + port + "/")
		if got := Classify(err); got != KindBlocked {
			t.Errorf("%s: Classify(%v) = %q, want blocked", addr, err, got)
		}
		if hits.Load() != 0 || lookups.Load() == 0 {
			t.Errorf("%s: far side got %d requests, %d lookups; want 0 requests", addr, hits.Load(), lookups.Load())
		}
	}
}

// Every connection resolves and checks again: a name that answered an
// allowlisted address once and loopback later (DNS rebinding) is refused
// on the next connection.
func TestEveryConnectionIsChecked(t *testing.T) {
	_, hits, port := far(t, ok)
	var lookups atomic.Int64
	answers := []string{"127.0.0.1", "127.0.0.2"}
	d := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		n := lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr(answers[min(int(n)-1, 1)])}, nil
	}})
	c := d.Client(5 * time.Second)
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, "http://rebind.example.com:"+port+"/", nil)
		req.Close = true // a new connection each time
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("first request (allowlisted address): %v", err)
	}
	if err := get(); Classify(err) != KindBlocked {
		t.Errorf("second request after rebinding to 127.0.0.2: %v, want blocked", err)
	}
	if hits.Load() != 1 {
		t.Errorf("far side got %d requests, want 1", hits.Load())
	}
}

func TestLiteralAddressesAreRefusedAtDial(t *testing.T) {
	_, hits, port := far(t, ok)
	c := New(Options{}).Client(5 * time.Second)
	for _, host := range []string{"127.0.0.1", "[::ffff:127.0.0.1]", "localhost", "localhost."} {
		_, err := c.Get("http://" + host + ":" + port + "/")
		if Classify(err) != KindBlocked {
			t.Errorf("%s: %v, want blocked", host, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("far side got %d requests, want 0", hits.Load())
	}
}

func TestAllowlist(t *testing.T) {
	_, hits, port := far(t, ok)
	var lookups atomic.Int64
	p, h, err := ParseAllow(" 127.0.0.0/8 , hooks.internal.example., 10.1.2.3")
	if err != nil || len(p) != 2 || len(h) != 1 || h[0] != "hooks.internal.example" {
		t.Fatalf("ParseAllow: %v %v %v", p, h, err)
	}
	for name, o := range map[string]Options{
		"cidr":     {Allow: p},
		"host":     {AllowHosts: h},
		"loopback": {AllowLoopback: true},
	} {
		o.Lookup = resolveTo(&lookups, "127.0.0.1")
		resp, err := New(o).Client(5 * time.Second).Get("http://hooks.internal.example:" + port + "/")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		resp.Body.Close()
	}
	if hits.Load() != 3 {
		t.Errorf("far side got %d requests, want 3", hits.Load())
	}
	// Metadata stays refused whatever the allowlist says.
	d := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}, AllowHosts: []string{"metadata.google.internal"}})
	if d.Check(netip.MustParseAddr("169.254.169.254"), true) == "" || d.Check(netip.MustParseAddr("169.254.1.1"), false) != "" {
		t.Error("allowlist: metadata allowed or allowlisted link-local refused")
	}
	for _, bad := range []string{"10.0.0.0/33", "not a host!", "a..b"} {
		if _, _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var other atomic.Int64
	srv, _, _ := far(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			other.Add(1)
		}
		http.Redirect(w, r, "/other", http.StatusFound)
	})
	resp, err := New(Options{AllowLoopback: true}).Client(5 * time.Second).Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || other.Load() != 0 {
		t.Errorf("status %d, /other got %d requests; want 302 and none", resp.StatusCode, other.Load())
	}
}

func TestClassify(t *testing.T) {
	d := New(Options{AllowLoopback: true, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}
	}})
	c := d.Client(2 * time.Second)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(ok))
	defer tlsSrv.Close()
	stall, _ := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	defer stall.Close()
	for _, tc := range []struct{ url, want string }{
		{"http://nowhere.example/", KindDNS},
		{"http://" + closed + "/", KindRefused},
		{tlsSrv.URL + "/", KindTLS},
		{"http://" + stall.Addr().String() + "/", KindTimeout},
		{"http://10.0.0.1/", KindBlocked},
	} {
		_, err := c.Get(tc.url)
		if got := Classify(err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tc.url, err, got, tc.want)
		}
	}
	if got := Classify(errors.New("x")); got != KindConnection {
		t.Errorf("Classify(other) = %q", got)
	}
}
