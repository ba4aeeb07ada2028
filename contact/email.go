package contact

import (
	"fmt"
	"net/mail"
	"strings"
)

// Limits from RFC 5321 §4.5.3.1 (a path is at most 256 octets including the
// angle brackets, so an address is at most 254) and its local-part limit.
const (
	maxEmail      = 254
	maxEmailLocal = 64
	maxEmailLabel = 63
)

func emailErr(reason string) error { return fmt.Errorf("%w: %s", ErrInvalidEmail, reason) }

// NormalizeEmail returns raw trimmed and in lower case, after checking that it
// is a bare address ("ada@example.com", not "Ada <ada@example.com>").
//
// The whole address is lower-cased, the local part included. RFC 5321 lets a
// server treat the local part as case-sensitive, but no mainstream provider
// does, and the identity of a lead must not depend on how a CRM capitalised
// an address.
//
// Only ASCII is accepted, and only the everyday form: no quoted local parts,
// comments, or domain literals. An internationalised address needs SMTPUTF8
// end to end and a Unicode case-folding rule; its domain can be given in its
// ASCII (xn--) form. Anything net/mail would rewrite while parsing is refused,
// so the result is exactly what the caller sent, minus case and outer space.
//
// The ASCII check comes before lower-casing: Unicode case mapping turns some
// non-ASCII letters into ASCII ones (the Kelvin sign U+212A into "k"), and
// lower-casing first would deliver "\u212Aate@example.com" to kate@example.com.
func NormalizeEmail(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", emailErr("empty")
	}
	if len(s) > maxEmail {
		return "", emailErr(fmt.Sprintf("longer than %d bytes", maxEmail))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return "", emailErr("only printable ASCII without spaces is accepted")
		}
	}
	s = strings.ToLower(s) // ASCII only now: a byte-for-byte mapping
	if strings.Count(s, "@") != 1 {
		return "", emailErr("must contain exactly one @")
	}
	addr, err := mail.ParseAddress(s)
	if err != nil {
		return "", emailErr("not an email address")
	}
	if addr.Name != "" || addr.Address != s {
		return "", emailErr("must be a bare address such as name@example.com")
	}
	local, domain, _ := strings.Cut(s, "@")
	if local == "" || domain == "" {
		return "", emailErr("missing local part or domain")
	}
	if len(local) > maxEmailLocal {
		return "", emailErr(fmt.Sprintf("local part longer than %d bytes", maxEmailLocal))
	}
	if !strings.Contains(domain, ".") {
		return "", emailErr("domain must contain a dot")
	}
	for label := range strings.SplitSeq(domain, ".") {
		if err := checkDomainLabel(label); err != nil {
			return "", err
		}
	}
	return s, nil
}

// checkDomainLabel applies the host name rules (RFC 1123 §2.1) that net/mail
// does not: it accepts any atom as a domain, such as "a_b" or "-x".
func checkDomainLabel(label string) error {
	if label == "" || len(label) > maxEmailLabel {
		return emailErr(fmt.Sprintf("each part of the domain must be 1 to %d characters", maxEmailLabel))
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return emailErr("a domain part cannot start or end with a hyphen")
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return emailErr("domain may contain only letters, digits, hyphens and dots")
		}
	}
	return nil
}
