// Package contact normalises the identifiers that name a recipient — phone
// numbers to E.164, email addresses to lower case — before anything else
// uses them. Leads, conversations and the duplicate guard all key on these
// forms, so "+1 (555) 010-0000" and "+15550100000" must become the same
// string, and a normalised value must normalise to itself.
package contact

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/nyaruka/phonenumbers"
)

// ErrInvalidPhone and ErrInvalidEmail are wrapped by every error that
// NormalizePhone and NormalizeEmail return. The wrapping error's text is a
// short reason that is safe to show to the client; it never repeats the input.
var (
	ErrInvalidPhone = errors.New("invalid phone number")
	ErrInvalidEmail = errors.New("invalid email address")
)

// maxPhoneInput bounds the raw input. The longest real formatted number is far
// shorter; the bound keeps the parser's work (it runs regular expressions)
// small on hostile input.
const maxPhoneInput = 64

// e164 is the shape of every phone number this package returns: a plus, a
// country code that does not start with 0, and 7 to 15 digits in all.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func phoneErr(reason string) error { return fmt.Errorf("%w: %s", ErrInvalidPhone, reason) }

// NormalizePhone returns raw in E.164 form ("+15550100000"). A number without
// a country code is read as a number of defaultRegion (an ISO 3166-1 alpha-2
// code such as "US"); with an empty or unknown region such numbers are
// rejected.
//
// The test is "possible", not "valid": phonenumbers.IsValidNumber checks the
// number against each country's allocated ranges, and rejects the fictional
// 555-01XX numbers that CRMs use in test data and demos, and numbers in ranges
// allocated after the library's metadata was built. A possible number has the
// right length for its country; the provider is the final judge of whether
// it can be delivered. Numbers that are possible only for local dialling (a
// US number without its area code) are rejected: they have no E.164 form.
//
// Letters are rejected, so vanity numbers ("1-800-FLOWERS") and extensions
// ("ext. 12") are refused rather than silently converted or dropped: an SMS
// cannot be sent to an extension, and two spellings of one phone must not
// become different recipients.
func NormalizePhone(raw, defaultRegion string) (string, error) {
	if len(raw) > maxPhoneInput {
		return "", phoneErr(fmt.Sprintf("longer than %d bytes", maxPhoneInput))
	}
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", phoneErr("empty")
	}
	digits := 0
	for _, r := range s {
		switch {
		case unicode.IsLetter(r):
			return "", phoneErr("contains letters")
		case unicode.IsControl(r):
			return "", phoneErr("contains control characters")
		case unicode.IsDigit(r):
			digits++
		}
	}
	if digits == 0 {
		return "", phoneErr("contains no digits")
	}
	region := strings.ToUpper(strings.TrimSpace(defaultRegion))

	num, err := phonenumbers.Parse(s, region)
	switch {
	case errors.Is(err, phonenumbers.ErrInvalidCountryCode):
		return "", phoneErr("missing or unknown country code; write the number as +<country code><number>")
	case err != nil:
		return "", phoneErr("not a phone number")
	}
	if num.GetExtension() != "" {
		return "", phoneErr("extensions are not supported")
	}
	switch phonenumbers.IsPossibleNumberWithReason(num) {
	case phonenumbers.IS_POSSIBLE:
	case phonenumbers.INVALID_COUNTRY_CODE:
		return "", phoneErr("unknown country code")
	case phonenumbers.TOO_SHORT, phonenumbers.IS_POSSIBLE_LOCAL_ONLY:
		return "", phoneErr("too short for its country")
	case phonenumbers.TOO_LONG:
		return "", phoneErr("too long for its country")
	default:
		return "", phoneErr("wrong length for its country")
	}
	out := phonenumbers.Format(num, phonenumbers.E164)
	if !e164.MatchString(out) {
		return "", phoneErr("not representable in E.164")
	}
	// The parser strips national prefixes and carrier codes, and for numbers
	// that are possible but not valid it can read its own output differently
	// (the stripped digits look like a prefix again). Callers key leads and
	// locks on this string, so it must be a fixed point: refuse the rare
	// number whose E.164 form would not normalise to itself.
	again, err := phonenumbers.Parse(out, region)
	if err != nil || phonenumbers.Format(again, phonenumbers.E164) != out ||
		phonenumbers.IsPossibleNumberWithReason(again) != phonenumbers.IS_POSSIBLE {
		return "", phoneErr("ambiguous number; write it as +<country code><number>")
	}
	return out, nil
}

// Region returns raw as a region code NormalizePhone understands (an ISO
// 3166-1 alpha-2 code with phone metadata, upper case) and whether it is one.
func Region(raw string) (string, bool) {
	r := strings.ToUpper(strings.TrimSpace(raw))
	return r, len(r) == 2 && phonenumbers.GetSupportedRegions()[r]
}

// TimeZones lists the IANA time zones an E.164 number may be in
// (libphonenumber's time-zone map: a US area code, a whole country), or
// nil when the map does not place it.
func TimeZones(e164Number string) []string {
	n, err := phonenumbers.Parse(e164Number, "")
	if err != nil {
		return nil
	}
	zones, err := phonenumbers.GetTimezonesForNumber(n)
	if err != nil {
		return nil
	}
	var out []string
	for _, z := range zones {
		if z != "" && z != "Etc/Unknown" {
			out = append(out, z)
		}
	}
	return out
}
