package consent

import (
	"strings"
	"unicode"
)

// Keyword is what an inbound reply asks for.
type Keyword string

// Keyword kinds. None is an ordinary message.
const (
	None    Keyword = ""
	OptOut  Keyword = "opt_out"
	OptIn   Keyword = "opt_in"
	HelpMsg Keyword = "help"
)

// The words, after normalisation (see Match). Opt-out: Twilio's default
// long-code list (STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, REVOKE,
// OPTOUT) and the words 47 CFR 64.1200(a)(10) names as a revocation
// ("stop", "quit", "end", "revoke", "opt out", "cancel", "unsubscribe"),
// plus the spellings "OPT-OUT" and "STOP ALL" carriers accept. Opt-in:
// START, UNSTOP, YES (Twilio, CTIA). HELP and INFO are recorded only.
var keywords = map[string]Keyword{
	"STOP": OptOut, "STOPALL": OptOut, "STOP ALL": OptOut, "UNSUBSCRIBE": OptOut,
	"CANCEL": OptOut, "END": OptOut, "QUIT": OptOut, "REVOKE": OptOut,
	"OPTOUT": OptOut, "OPT OUT": OptOut, "OPT-OUT": OptOut,
	"START": OptIn, "UNSTOP": OptIn, "YES": OptIn,
	"HELP": HelpMsg, "INFO": HelpMsg,
}

// Match classifies an inbound message. The whole message is the keyword:
// surrounding white space is trimmed, runs of inner white space count as
// one space, and case is folded ("  Stop ", "opt  out"). Anything else —
// "stop texting me", "STOP." — is an ordinary message (see the README on
// what the FCC rule asks beyond keywords).
func Match(text string) (Keyword, string) {
	if len(text) > 32 { // longer than any keyword with generous spacing
		return None, ""
	}
	norm := strings.ToUpper(strings.Join(strings.FieldsFunc(text, unicode.IsSpace), " "))
	if k, ok := keywords[norm]; ok {
		return k, norm
	}
	return None, ""
}
