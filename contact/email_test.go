package contact

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		raw  string
		want string // "" means an error is expected
	}{
		{"plain", "ada@example.com", "ada@example.com"},
		{"mixed case", "Ada.Lovelace@Example.COM", "ada.lovelace@example.com"},
		{"outer space", "  ada@example.com\n", "ada@example.com"},
		{"plus tag", "ada+crm@example.com", "ada+crm@example.com"},
		{"subdomain and hyphen", "a@mail.ex-ample.co.uk", "a@mail.ex-ample.co.uk"},
		{"punycode domain", "a@xn--mller-kva.de", "a@xn--mller-kva.de"},
		{"atext specials", "a!#$%&'*+/=?^_`{|}~-b@example.com", "a!#$%&'*+/=?^_`{|}~-b@example.com"},
		{"local part at limit", long(64) + "@example.com", long(64) + "@example.com"},
		{"254 bytes", long(64) + "@" + long(63) + "." + long(63) + "." + long(57) + ".com", long(64) + "@" + long(63) + "." + long(63) + "." + long(57) + ".com"},

		{"empty", "", ""},
		{"blank", "  ", ""},
		{"no at", "ada.example.com", ""},
		{"two ats", "ada@b@example.com", ""},
		{"empty local", "@example.com", ""},
		{"empty domain", "ada@", ""},
		{"domain without dot", "ada@localhost", ""},
		{"display name", "Ada <ada@example.com>", ""},
		{"angle brackets", "<ada@example.com>", ""},
		{"quoted local part", `"ada lovelace"@example.com`, ""},
		{"quoted plain local part", `"ada"@example.com`, ""},
		{"comment", "ada(x)@example.com", ""},
		{"domain literal", "ada@[127.0.0.1]", ""},
		{"space inside", "ada @example.com", ""},
		{"leading dot", ".ada@example.com", ""},
		{"trailing dot in local", "ada.@example.com", ""},
		{"double dot", "a..da@example.com", ""},
		{"trailing dot in domain", "ada@example.com.", ""},
		{"empty domain label", "ada@example..com", ""},
		{"hyphen label edge", "ada@-example.com", ""},
		{"underscore in domain", "ada@ex_ample.com", ""},
		{"non-ASCII local", "müller@example.de", ""},
		{"non-ASCII domain", "a@müller.de", ""},
		{"CRLF injection", "ada@example.com\r\nBcc: x@example.com", ""},
		{"control character", "ada\x00@example.com", ""},
		{"local part too long", long(65) + "@example.com", ""},
		{"domain label too long", "a@" + long(64) + ".com", ""},
		{"over 254 bytes", long(64) + "@" + long(63) + "." + long(63) + "." + long(58) + ".com", ""},
		{"invalid UTF-8", "ada\xff@example.com", ""},
		{"Kelvin sign lower-cases to k", "\u212Aate@example.com", ""},
		{"Kelvin sign in the domain", "kate@example.\u212Az", ""},
		{"dotted capital I", "\u0130da@example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeEmail(tt.raw)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("NormalizeEmail(%q) = %q, want an error", tt.raw, got)
				}
				if !errors.Is(err, ErrInvalidEmail) {
					t.Errorf("error %v does not wrap ErrInvalidEmail", err)
				}
				if got != "" {
					t.Errorf("got %q with an error, want \"\"", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizeEmail(%q): %v", tt.raw, err)
			}
			if got != tt.want {
				t.Errorf("NormalizeEmail(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{
		"ada@example.com",
		"Ada.Lovelace@Example.COM",
		"Ada <ada@example.com>",
		`"a b"@example.com`,
		"a(x)@example.com",
		"ada@[127.0.0.1]",
		"=?utf-8?q?ada?= <ada@example.com>",
		"ada@example.com.",
		"İ@example.com",
		"",
		"@",
		"\xff@\xfe.com",
		"\u212Aate@example.com", // Kelvin sign: lower-cases to ASCII "k"
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := NormalizeEmail(raw)
		if err != nil {
			if got != "" {
				t.Fatalf("NormalizeEmail(%q) = %q with error %v", raw, got, err)
			}
			if !errors.Is(err, ErrInvalidEmail) {
				t.Fatalf("error %v does not wrap ErrInvalidEmail", err)
			}
			return
		}
		if got != strings.ToLower(got) {
			t.Fatalf("NormalizeEmail(%q) = %q, not lower case", raw, got)
		}
		// Accepted means: what was sent, trimmed, with only ASCII letters
		// lower-cased. No other character may turn into an ASCII one.
		sent := strings.TrimSpace(raw)
		if len(sent) != len(got) {
			t.Fatalf("NormalizeEmail(%q) = %q: not the address sent", raw, got)
		}
		for i := range len(sent) {
			c := sent[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != got[i] {
				t.Fatalf("NormalizeEmail(%q) = %q: byte %d changed", raw, got, i)
			}
		}
		if len(got) > 254 || strings.Count(got, "@") != 1 {
			t.Fatalf("NormalizeEmail(%q) = %q: over 254 bytes or not one @", raw, got)
		}
		again, err := NormalizeEmail(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: NormalizeEmail(%q) = %q, then %q, %v", raw, got, again, err)
		}
	})
}
