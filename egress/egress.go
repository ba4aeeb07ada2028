// Package egress decides where msgapi may connect when a tenant chooses the
// URL (a workspace's event endpoints): never to msgapi's own host, its
// private network or a cloud metadata service, unless the operator
// allowlists the receiver.
//
// The check runs in the dialer, on the address actually dialled, for every
// connection: a name that resolved to a public address when the endpoint
// was created and to 127.0.0.1 a moment later (DNS rebinding) is refused
// at connect time. A Dialer resolves the name itself, drops the addresses
// it refuses, and dials the rest by address; net.Dialer.Control checks the
// socket's address once more before connecting. Its Client follows no
// redirects and uses no proxy from the environment.
package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kinds of Error: what a workspace is told about a failed connection. The
// error's detail (addresses, resolver messages) is for the log only.
const (
	KindDNS        = "dns"        // the name did not resolve
	KindBlocked    = "blocked"    // every address it resolved to is refused
	KindRefused    = "refused"    // the connection was refused
	KindTimeout    = "timeout"    // no connection or answer in time
	KindTLS        = "tls"        // the TLS handshake or certificate failed
	KindConnection = "connection" // any other transport failure
)

// Error is a refused or failed connection.
type Error struct {
	Kind string
	// Addr is the refused address (KindBlocked).
	Addr netip.Addr
	// Reason names the refused range, e.g. "loopback" (KindBlocked).
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Kind == KindBlocked {
		return fmt.Sprintf("egress: %s is a %s address: refused", e.Addr, e.Reason)
	}
	return fmt.Sprintf("egress: %s: %v", e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Options configure a Dialer. The zero value refuses every special-purpose
// address.
type Options struct {
	// Allow lists the networks msgapi may reach although they are private
	// (an operator's receivers inside its network). Metadata addresses stay
	// refused.
	Allow []netip.Prefix
	// AllowHosts lists host names (exact, case-insensitive, without a
	// trailing dot) whose addresses are reached wherever they are, metadata
	// addresses excepted.
	AllowHosts []string
	// AllowLoopback lets loopback addresses through (development and
	// tests, when the operator opts in).
	AllowLoopback bool
	// Lookup resolves a host name; nil uses the system resolver. Tests
	// inject one so no test resolves a real name.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Timeout bounds one connection attempt (default 10s).
	Timeout time.Duration
}

// Dialer connects only to allowed addresses.
type Dialer struct {
	opts  Options
	hosts map[string]bool
}

// New returns a Dialer.
func New(o Options) *Dialer {
	if o.Lookup == nil {
		o.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	d := &Dialer{opts: o, hosts: map[string]bool{}}
	for _, h := range o.AllowHosts {
		d.hosts[canonHost(h)] = true
	}
	return d
}

// ParseAllow reads an allowlist: comma-separated CIDRs, addresses and host
// names (MSGAPI_EGRESS_ALLOW).
func ParseAllow(s string) (prefixes []netip.Prefix, hosts []string, err error) {
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case strings.Contains(f, "/"):
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, nil, fmt.Errorf("%q is not a CIDR (e.g. 10.1.0.0/16)", f)
			}
			prefixes = append(prefixes, p.Masked())
		default:
			if a, err := netip.ParseAddr(f); err == nil {
				prefixes = append(prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			if !validHostName(f) {
				return nil, nil, fmt.Errorf("%q is neither a CIDR, an address nor a host name", f)
			}
			hosts = append(hosts, canonHost(f))
		}
	}
	return prefixes, hosts, nil
}

func canonHost(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// special are the ranges that are never a third party's receiver
// (RFC 6890 and its successors), besides what netip's predicates name.
var special = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	mdAddrs = map[netip.Addr]bool{
		netip.MustParseAddr("169.254.169.254"): true, // AWS, Azure, GCP, OpenStack, DigitalOcean …
		netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task credentials
		netip.MustParseAddr("169.254.169.123"): true, // AWS time sync
		netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
		netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud
		netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
		netip.MustParseAddr("fd00:ec2::23"):    true, // AWS DNS over IPv6
	}
)

// Check reports why a is refused ("" when it is allowed). hostAllowed: the
// name it came from is allowlisted.
func (d *Dialer) Check(a netip.Addr, hostAllowed bool) string {
	a = a.Unmap()
	if !a.IsValid() {
		return "invalid"
	}
	if mdAddrs[a] {
		return "cloud metadata"
	}
	// NAT64 and 6to4 addresses carry an IPv4 address: judge that one.
	if a.Is6() && (nat64.Contains(a) || sixTo4.Contains(a)) {
		b := a.As16()
		var v4 [4]byte
		if nat64.Contains(a) {
			copy(v4[:], b[12:])
		} else {
			copy(v4[:], b[2:6])
		}
		if r := d.Check(netip.AddrFrom4(v4), hostAllowed); r != "" {
			return r + " (embedded in " + a.String() + ")"
		}
		return ""
	}
	if hostAllowed {
		return ""
	}
	for _, p := range d.opts.Allow {
		if p.Contains(a) {
			return ""
		}
	}
	switch {
	case a.IsLoopback():
		if d.opts.AllowLoopback {
			return ""
		}
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, s := range special {
		if s.p.Contains(a) {
			return s.reason
		}
	}
	return ""
}

// CheckHost judges a URL's host without resolving it: an address literal
// or a localhost name that would be refused at connect time is refused
// here already (endpoint creation). Names are judged when dialled.
func (d *Dialer) CheckHost(host string) string {
	if d.hosts[canonHost(host)] {
		return ""
	}
	h := strings.Trim(host, "[]")
	if i := strings.IndexByte(h, '%'); i >= 0 { // a zone: link-local by nature
		return "link-local"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return d.Check(a, false)
	}
	// Legacy IPv4 forms (127.1, 0x7f.1, 2130706433) that resolvers accept.
	if isLegacyIPv4(h) {
		return "numeric"
	}
	if c := canonHost(h); c == "localhost" || strings.HasSuffix(c, ".localhost") {
		if d.opts.AllowLoopback {
			return ""
		}
		return "loopback"
	}
	return ""
}

// isLegacyIPv4 reports whether h is all digits, dots and hex prefixes:
// an address in a form netip does not parse but C resolvers do.
func isLegacyIPv4(h string) bool {
	if h == "" {
		return false
	}
	for _, part := range strings.Split(strings.ToLower(h), ".") {
		if part == "" {
			return false
		}
		if _, err := strconv.ParseUint(part, 0, 32); err != nil {
			return false
		}
	}
	return true
}

// AllowsLoopback reports whether loopback addresses are let through.
func (d *Dialer) AllowsLoopback() bool { return d.opts.AllowLoopback }

// DialContext resolves addr's host, refuses the addresses Check refuses,
// and connects to the first allowed address that answers.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &Error{Kind: KindConnection, Err: err}
	}
	port, err := strconv.ParseUint(portS, 10, 16)
	if err != nil {
		return nil, &Error{Kind: KindConnection, Err: fmt.Errorf("port %q", portS)}
	}
	hostAllowed := d.hosts[canonHost(host)]
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if r := d.CheckHost(host); r != "" {
			return nil, &Error{Kind: KindBlocked, Reason: r, Err: fmt.Errorf("host %s", host)}
		}
		lctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
		addrs, err = d.opts.Lookup(lctx, host)
		cancel()
		if err != nil {
			return nil, &Error{Kind: KindDNS, Err: err}
		}
		if len(addrs) == 0 {
			return nil, &Error{Kind: KindDNS, Err: fmt.Errorf("%s has no addresses", host)}
		}
	}
	var firstErr error
	for _, a := range addrs {
		if r := d.Check(a, hostAllowed); r != "" {
			if firstErr == nil {
				firstErr = &Error{Kind: KindBlocked, Addr: a.Unmap(), Reason: r}
			}
			continue
		}
		nd := net.Dialer{Timeout: d.opts.Timeout, Control: d.control(hostAllowed)}
		c, err := nd.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		var be *Error
		if firstErr == nil || (errors.As(firstErr, &be) && be.Kind == KindBlocked) {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// control checks the address the socket is about to connect to: the last
// word, whatever resolved it.
func (d *Dialer) control(hostAllowed bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &Error{Kind: KindBlocked, Reason: "unparsable", Err: err}
		}
		if r := d.Check(ap.Addr(), hostAllowed); r != "" {
			return &Error{Kind: KindBlocked, Addr: ap.Addr().Unmap(), Reason: r}
		}
		return nil
	}
}

// Client returns an HTTP client that dials through d, follows no
// redirects (a 3xx is the answer) and ignores proxy settings; timeout
// bounds a whole request.
func (d *Dialer) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:            d.DialContext,
			Proxy:                  nil,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    d.opts.Timeout,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Classify names what went wrong with a request, in the words a workspace
// sees: dns, blocked, refused, timeout, tls or connection.
func Classify(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Kind != KindConnection || e.Err == nil {
			return e.Kind
		}
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var rhErr tls.RecordHeaderError
	var uaErr x509.UnknownAuthorityError
	var hnErr x509.HostnameError
	var ciErr x509.CertificateInvalidError
	var alert tls.AlertError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return KindTimeout
		}
		return KindDNS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.As(err, &certErr), errors.As(err, &rhErr), errors.As(err, &uaErr), errors.As(err, &hnErr), errors.As(err, &ciErr), errors.As(err, &alert),
		strings.Contains(err.Error(), "tls: "):
		return KindTLS
	}
	return KindConnection
}
