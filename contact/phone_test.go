package contact

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var e164Want = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func TestNormalizePhone(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		region string
		want   string // "" means an error is expected
	}{
		{"formatted with country code", "+1 (555) 010-0000", "US", "+15550100000"},
		{"national with region", "555-010-0000", "US", "+15550100000"},
		{"already E.164", "+15550100000", "US", "+15550100000"},
		{"E.164 ignores region", "+15550100000", "GB", "+15550100000"},
		{"E.164 without region", "+15550100000", "", "+15550100000"},
		{"dots", "555.010.0199", "US", "+15550100199"},
		{"leading 1 national", "1 555 010 0000", "US", "+15550100000"},
		{"outer space", "  +15550100000\t", "US", "+15550100000"},
		{"lower-case region", "5550100000", "us", "+15550100000"},
		{"fictional range in a real area code", "(202) 555-0143", "US", "+12025550143"},
		{"UK national with trunk 0", "020 7946 0000", "GB", "+442079460000"},
		{"UK international", "+44 20 7946 0000", "US", "+442079460000"},
		{"international prefix 00", "0044 20 7946 0000", "GB", "+442079460000"},
		{"US international prefix 011", "011 44 20 7946 0000", "US", "+442079460000"},
		{"Italian leading zero kept", "+39 06 1234 5678", "US", "+390612345678"},
		{"German mobile", "+49 1512 3456789", "", "+4915123456789"},
		{"full-width digits", "+１ ５５５ ０１０ ００００", "", "+15550100000"},

		{"empty", "", "US", ""},
		{"blank", "   ", "US", ""},
		{"letters only", "abcdefghij", "US", ""},
		{"vanity letters", "1-800-FLOWERS", "US", ""},
		{"extension", "+1 555 010 0000 ext. 12", "US", ""},
		{"extension with hash", "+1 555 010 0000#12", "US", ""},
		{"tel URI", "tel:+1-555-010-0000", "US", ""},
		{"punctuation only", "+()- .", "US", ""},
		{"national without region", "555-010-0000", "", ""},
		{"unknown region", "555-010-0000", "XX", ""},
		{"local-only US number", "010-0000", "US", ""},
		{"too short", "+1 555", "US", ""},
		{"too long for US", "+1 555 010 0000 0000", "US", ""},
		{"unknown country code", "+999 1234567", "US", ""},
		{"absurd length", "+" + strings.Repeat("1", 40), "US", ""},
		{"over 64 bytes", strings.Repeat(" ", 60) + "+15550100000", "US", ""},
		{"control character", "+1555\x000100000", "US", ""},
		{"newline inside", "+1555\n0100000", "US", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizePhone(tt.raw, tt.region)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("NormalizePhone(%q, %q) = %q, want an error", tt.raw, tt.region, got)
				}
				if !errors.Is(err, ErrInvalidPhone) {
					t.Errorf("error %v does not wrap ErrInvalidPhone", err)
				}
				if got != "" {
					t.Errorf("got %q with an error, want \"\"", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizePhone(%q, %q): %v", tt.raw, tt.region, err)
			}
			if got != tt.want {
				t.Errorf("NormalizePhone(%q, %q) = %q, want %q", tt.raw, tt.region, got, tt.want)
			}
		})
	}
}

// The error text is shown to API clients: it must not echo their input.
func TestNormalizePhoneErrorDoesNotEchoInput(t *testing.T) {
	for _, raw := range []string{"secret-letters", "+999 1234567", "555-010-0000"} {
		_, err := NormalizePhone(raw, "")
		if err == nil {
			t.Fatalf("NormalizePhone(%q): want an error", raw)
		}
		if strings.Contains(err.Error(), raw) {
			t.Errorf("error %q repeats the input", err)
		}
	}
}

func FuzzNormalizePhone(f *testing.F) {
	seeds := []struct{ raw, region string }{
		{"+1 (555) 010-0000", "US"},
		{"555-010-0000", "US"},
		{"+15550100000", ""},
		{"020 7946 0000", "GB"},
		{"0044 20 7946 0000", "GB"},
		{"+39 06 1234 5678", "IT"},
		{"8 800 555 35 35", "RU"},
		{"+7 8 800 555 35 35", "RU"},
		{"010-0000", "US"},
		{"1-800-FLOWERS", "US"},
		{"+1 555 010 0000 ext. 12", "US"},
		{"", ""},
		{"+", "ZZ"},
		{"\xff\xfe", "US"},
	}
	for _, s := range seeds {
		f.Add(s.raw, s.region)
	}
	f.Fuzz(func(t *testing.T, raw, region string) {
		got, err := NormalizePhone(raw, region)
		if err != nil {
			if got != "" {
				t.Fatalf("NormalizePhone(%q, %q) = %q with error %v", raw, region, got, err)
			}
			if !errors.Is(err, ErrInvalidPhone) {
				t.Fatalf("error %v does not wrap ErrInvalidPhone", err)
			}
			return
		}
		if !e164Want.MatchString(got) {
			t.Fatalf("NormalizePhone(%q, %q) = %q, not E.164", raw, region, got)
		}
		again, err := NormalizePhone(got, region)
		if err != nil || again != got {
			t.Fatalf("not idempotent: NormalizePhone(%q, %q) = %q, then %q, %v", raw, region, got, again, err)
		}
		// An E.164 number carries its own country: the region must not matter.
		if other, err := NormalizePhone(got, ""); err != nil || other != got {
			t.Fatalf("NormalizePhone(%q, \"\") = %q, %v; want %q", got, other, err, got)
		}
	})
}

func TestRegion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"US", "US", true}, {" gb ", "GB", true}, {"de", "DE", true},
		{"", "", false}, {"ZZ", "ZZ", false}, {"USA", "USA", false}, {"001", "001", false}, {"U", "U", false},
	} {
		got, ok := Region(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Region(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTimeZones(t *testing.T) {
	for num, want := range map[string]string{
		"+81312345678": "[Asia/Tokyo]",
		"+12125550100": "[America/New_York]",
		"+14155550100": "[America/Los_Angeles]",
		"+4930123456":  "[Europe/Berlin]",
	} {
		if got := fmt.Sprint(TimeZones(num)); got != want {
			t.Errorf("TimeZones(%s) = %s, want %s", num, got, want)
		}
	}
	if got := TimeZones("not a number"); got != nil {
		t.Errorf("TimeZones of garbage = %v", got)
	}
}
