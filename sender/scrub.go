package sender

import (
	"regexp"
	"strings"
)

// Placeholders Scrub puts where an address or a number was.
const (
	ScrubbedEmail = "<email>"
	ScrubbedPhone = "<phone>"
)

var (
	// An email address as providers quote them: go-mail's "affected
	// recipient(s): ada@example.com", SMTP's "<ada@example.com>: no such
	// user". Broader than a valid address on purpose.
	emailShape = regexp.MustCompile(`[^\s<>()\[\]{},;:"'@]+@[^\s<>()\[\]{},;:"'@]+`)
	// A run of digits with the separators people and providers put in
	// numbers: "+14155550100", "+1 (415) 555-0100", "415.555.0100".
	digitRun = regexp.MustCompile(`\+?\(?\d[\d ().-]*\d`)
)

// Scrub returns a provider's error text fit for a log line: the message's
// own recipient address and number, and anything shaped like an email
// address or a phone number (E.164, or 10 to 15 digits, however separated),
// become ScrubbedEmail and ScrubbedPhone. A log is read by more people than
// the workspace's own data, and kept longer: the full text stays on the
// message document only. Over-scrubbing (a 10-digit id) is the accepted cost.
func Scrub(text string, m Message) string {
	if text == "" {
		return ""
	}
	if e := m.RecipientEmail; e != "" {
		text = replaceFold(text, e, ScrubbedEmail)
	}
	text = emailShape.ReplaceAllString(text, ScrubbedEmail)
	return scrubNumbers(text, digits(m.RecipientPhone))
}

// scrubNumbers replaces the phone-shaped digit runs of text. A run that is
// not one as a whole ("550 5.1.1 4155550100": 16 digits) is tried again
// word by word, so a number next to a status code is still found.
func scrubNumbers(text, own string) string {
	return digitRun.ReplaceAllStringFunc(text, func(run string) string {
		d := digits(run)
		switch {
		case len(d) >= 7 && own != "" && strings.HasSuffix(own, d): // the recipient's number, in any form
		case strings.HasPrefix(run, "+") && len(d) >= 7 && len(d) <= 15: // E.164
		case len(d) >= 10 && len(d) <= 15:
		default:
			if words := strings.Split(run, " "); len(words) > 1 {
				for i, w := range words {
					words[i] = scrubNumbers(w, own)
				}
				return strings.Join(words, " ")
			}
			return run
		}
		return ScrubbedPhone
	})
}

// digits returns the decimal digits of s.
func digits(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; '0' <= c && c <= '9' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// replaceFold replaces every ASCII-case-insensitive occurrence of old.
func replaceFold(s, old, repl string) string {
	lower, lold := strings.ToLower(s), strings.ToLower(old)
	if len(lower) != len(s) || !strings.Contains(lower, lold) {
		return s // non-ASCII case mapping changed lengths: the shape rules still apply
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, lold)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lower = s[i+len(old):], lower[i+len(old):]
	}
}
