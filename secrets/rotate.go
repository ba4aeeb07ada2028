package secrets

import (
	"errors"
	"fmt"
	"sort"
)

// Stored is one secret at rest, as an inventory yields it: its stored
// value (sealed or in clear), the AAD it is bound to, a name for errors
// ("the twilio secret of workspace ws_…"), and where it is: the _id of
// its document and the field that holds it.
type Stored struct {
	Value, AAD, Name string
	DocID, Field     string
}

// Each calls yield with every stored secret of one kind, stopping at the
// first error yield returns.
type Each func(yield func(Stored) error) error

// Report counts stored secrets by form.
type Report struct {
	Clear int // stored in clear
	// ByKey counts sealed secrets per key id.
	ByKey map[string]int
	// Unreadable lists the key ids of sealed secrets this keyring cannot
	// open, sorted.
	Unreadable []string
}

// Stale is how many secrets are not sealed with the current key: in clear,
// or under a previous key. `msgapi secrets rotate` re-seals them.
func (r Report) Stale(current string) int {
	n := r.Clear
	for id, c := range r.ByKey {
		if id != current {
			n += c
		}
	}
	return n
}

// Check reads every secret each yields and reports their forms, so that
// start-up can refuse to run with secrets it cannot open.
func (k *Keyring) Check(each Each) (Report, error) {
	r := Report{ByKey: map[string]int{}}
	unreadable := map[string]bool{}
	err := each(func(s Stored) error {
		id := StoredKeyID(s.Value)
		if id == "" {
			r.Clear++
			return nil
		}
		r.ByKey[id]++
		if _, _, err := k.Open(s.Value, s.AAD); err != nil && !unreadable[id] {
			unreadable[id] = true
			r.Unreadable = append(r.Unreadable, id)
		}
		return nil
	})
	sort.Strings(r.Unreadable)
	return r, err
}

// RotateReport is what Rotate did.
type RotateReport struct {
	Resealed int // re-encrypted with the current key (from clear or an older key)
	Current  int // already sealed with the current key
	// Changed secrets were replaced while the rotation ran, so they were
	// left alone; run it again.
	Changed int
}

// Rotate re-seals every secret each yields that is in clear or under a
// previous key, with the current key. replace writes the sealed value in
// place of s.Value, conditional on the value read; it reports false when
// the secret changed meanwhile (on the embedded engine a conditional
// update is not atomic: do not change secrets while a rotation runs). Run
// it until Resealed and Changed are 0; then the previous keys can go.
func (k *Keyring) Rotate(each Each, replace func(s Stored, sealed string) (bool, error)) (RotateReport, error) {
	var r RotateReport
	if !k.Enabled() {
		return r, errors.New("no key to encrypt with: set MSGAPI_SECRET_KEY (and the old key in MSGAPI_SECRET_KEY_PREVIOUS)")
	}
	err := each(func(s Stored) error {
		if StoredKeyID(s.Value) == k.CurrentID() {
			r.Current++
			return nil
		}
		plain, _, err := k.Open(s.Value, s.AAD)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		sealed, err := k.Seal(plain, s.AAD)
		if err != nil {
			return fmt.Errorf("seal %s: %w", s.Name, err)
		}
		switch ok, err := replace(s, sealed); {
		case err != nil:
			return err
		case ok:
			r.Resealed++
		default:
			r.Changed++
		}
		return nil
	})
	return r, err
}
