package secrets_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/secrets"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, secrets.KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func keyring(t *testing.T, current string, previous ...string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring(current, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const token = "0123456789abcdef0123456789abcdef" // a Twilio auth token's shape

func TestSealOpen(t *testing.T) {
	k := keyring(t, " "+newKey(t)+"\n") // white space around a key is ignored
	sealed, err := k.Seal(token, "ws_1/twilio")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, token) || !strings.HasPrefix(sealed, secrets.Prefix+k.CurrentID()+":") {
		t.Fatalf("sealed %q: want %s<key id>:… without the clear value", sealed, secrets.Prefix)
	}
	again, _ := k.Seal(token, "ws_1/twilio")
	if again == sealed {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
	got, id, err := k.Open(sealed, "ws_1/twilio")
	if err != nil || got != token || id != k.CurrentID() {
		t.Errorf("Open = %q, %q, %v; want the token and key id %s", got, id, err, k.CurrentID())
	}
	if secrets.StoredKeyID(sealed) != k.CurrentID() {
		t.Errorf("StoredKeyID = %q, want %q", secrets.StoredKeyID(sealed), k.CurrentID())
	}

	// Bound to its place, and tamper-evident.
	if _, _, err := k.Open(sealed, "ws_2/twilio"); !errors.Is(err, secrets.ErrCorrupt) {
		t.Errorf("opened under another workspace: %v, want ErrCorrupt", err)
	}
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1
	if _, _, err := k.Open(string(flipped), "ws_1/twilio"); err == nil {
		t.Error("an altered ciphertext opened")
	}
	for _, bad := range []string{secrets.Prefix, secrets.Prefix + k.CurrentID(), secrets.Prefix + k.CurrentID() + ":", secrets.Prefix + k.CurrentID() + ":!!"} {
		if _, _, err := k.Open(bad, "ws_1/twilio"); !errors.Is(err, secrets.ErrCorrupt) {
			t.Errorf("Open(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

// Rotation: the previous key still opens, the current one seals, and a
// keyring without the sealing key says so instead of returning garbage.
func TestRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	old := keyring(t, oldKey)
	sealed, _ := old.Seal(token, "a")

	rotated := keyring(t, newK, "", oldKey)
	if got, id, err := rotated.Open(sealed, "a"); err != nil || got != token || id != old.CurrentID() {
		t.Errorf("previous key: %q %q %v, want the token under key %s", got, id, err, old.CurrentID())
	}
	resealed, _ := rotated.Seal(token, "a")
	if secrets.StoredKeyID(resealed) != rotated.CurrentID() || rotated.CurrentID() == old.CurrentID() {
		t.Errorf("new seal has key id %q, want the current key's %q", secrets.StoredKeyID(resealed), rotated.CurrentID())
	}
	if _, _, err := old.Open(resealed, "a"); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Errorf("old keyring on a value of the new key: %v, want ErrUnknownKey", err)
	}
	var none *secrets.Keyring
	if _, _, err := none.Open(sealed, "a"); !errors.Is(err, secrets.ErrNoKey) {
		t.Errorf("no keyring on a sealed value: %v, want ErrNoKey", err)
	}
}

func TestWithoutKeyValuesStayClear(t *testing.T) {
	k := keyring(t, "")
	if k.Enabled() {
		t.Fatal("an empty key enabled encryption")
	}
	got, err := k.Seal(token, "a")
	if err != nil || got != token {
		t.Errorf("Seal without key = %q, %v; want the value unchanged", got, err)
	}
	if p, id, err := k.Open(token, "a"); err != nil || p != token || id != "" {
		t.Errorf("Open of a clear value = %q %q %v", p, id, err)
	}
	if _, err := k.Seal(secrets.Prefix+"x", "a"); !errors.Is(err, secrets.ErrLooksSealed) {
		t.Errorf("clear value that looks sealed: %v, want ErrLooksSealed", err)
	}
}

func TestBadKeys(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := []struct {
		name, current string
		previous      []string
		want          string
	}{
		{"not base64", "not a key!", nil, "MSGAPI_SECRET_KEY: not base64"},
		{"16 bytes", short, nil, "MSGAPI_SECRET_KEY: 16 bytes, want 32"},
		{"bad previous", newKey(t), []string{short}, "MSGAPI_SECRET_KEY_PREVIOUS, key 1: 16 bytes"},
		{"previous alone", "", []string{newKey(t)}, "MSGAPI_SECRET_KEY is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := secrets.NewKeyring(tt.current, tt.previous)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if err != nil && tt.current != "" && strings.Contains(err.Error(), tt.current) {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
	// URL-safe, unpadded keys are accepted too.
	raw := make([]byte, 32)
	if _, err := secrets.NewKeyring(base64.RawURLEncoding.EncodeToString(raw), nil); err != nil {
		t.Errorf("unpadded URL-safe key: %v", err)
	}
}
