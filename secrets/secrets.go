// Package secrets encrypts the secrets msgapi keeps in its store (a
// workspace's webhook signing secrets, such as a Twilio auth token) so that a
// copy of the database alone does not yield them.
//
// A sealed value is AES-256-GCM with a random 96-bit nonce, bound by
// additional data to where it is stored (workspace and channel), so a value
// copied to another workspace does not open. It is a string,
//
//	enc:v1:<key id>:<base64url(nonce | ciphertext | tag)>
//
// whose key id (8 hex digits derived from the key) names the key that sealed
// it. A Keyring holds the current key, which seals, and any previous keys,
// which still open: rotation is "add the new key as current, keep the old as
// previous, re-seal everything, then drop the old key".
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every sealed value.
const Prefix = "enc:v1:"

// KeySize is the key length: AES-256.
const KeySize = 32

// Errors of Open and Seal.
var (
	// ErrNoKey: a sealed value and no key configured at all.
	ErrNoKey = errors.New("the value is encrypted and no key is configured (MSGAPI_SECRET_KEY)")
	// ErrUnknownKey: a sealed value whose key id is not in the keyring.
	ErrUnknownKey = errors.New("the value is encrypted with a key that is not configured (neither MSGAPI_SECRET_KEY nor MSGAPI_SECRET_KEY_PREVIOUS)")
	// ErrCorrupt: a sealed value that does not decrypt (changed, moved to
	// another record, or not ours).
	ErrCorrupt = errors.New("the encrypted value does not decrypt: it was altered or copied from another record")
	// ErrLooksSealed: without a key, a clear value that starts like a sealed
	// one cannot be stored, or it would later be read as ciphertext.
	ErrLooksSealed = errors.New("a secret may not start with " + Prefix + " while secrets are stored in clear")
)

// Keyring holds the keys. The nil *Keyring has no key: values are stored
// in clear and sealed values cannot be opened.
type Keyring struct {
	current *key
	keys    map[string]*key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// NewKeyring builds a keyring from base64 keys (standard or URL alphabet,
// padded or not, surrounding white space ignored) of 32 bytes each. Both
// empty is no keyring (nil, nil); previous keys without a current one are
// an error.
func NewKeyring(current string, previous []string) (*Keyring, error) {
	current = strings.TrimSpace(current)
	var prev []string
	for _, p := range previous {
		if p = strings.TrimSpace(p); p != "" {
			prev = append(prev, p)
		}
	}
	if current == "" {
		if len(prev) > 0 {
			return nil, errors.New("MSGAPI_SECRET_KEY_PREVIOUS is set but MSGAPI_SECRET_KEY is not: previous keys only open; set the current key too")
		}
		return nil, nil
	}
	cur, err := parseKey(current)
	if err != nil {
		return nil, fmt.Errorf("MSGAPI_SECRET_KEY: %w", err)
	}
	k := &Keyring{current: cur, keys: map[string]*key{cur.id: cur}}
	for i, p := range prev {
		pk, err := parseKey(p)
		if err != nil {
			return nil, fmt.Errorf("MSGAPI_SECRET_KEY_PREVIOUS, key %d: %w", i+1, err)
		}
		if _, dup := k.keys[pk.id]; !dup {
			k.keys[pk.id] = pk
		}
	}
	return k, nil
}

func parseKey(s string) (*key, error) {
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64 (generate a key with: openssl rand -base64 32)")
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%d bytes, want %d (generate a key with: openssl rand -base64 32)", len(raw), KeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &key{id: KeyID(raw), aead: aead}, nil
}

// KeyID names a key without revealing it: 8 hex digits of a domain-separated
// SHA-256 of the key.
func KeyID(raw []byte) string {
	sum := sha256.Sum256(append([]byte("msgapi secret key id\x00"), raw...))
	return hex.EncodeToString(sum[:4])
}

// Enabled reports whether values are sealed.
func (k *Keyring) Enabled() bool { return k != nil && k.current != nil }

// CurrentID is the id of the key that seals, "" without a keyring.
func (k *Keyring) CurrentID() string {
	if !k.Enabled() {
		return ""
	}
	return k.current.id
}

// Seal encrypts plain with the current key, bound to aad (where the value
// is stored). Without a keyring it returns plain unchanged: the caller
// stores it in clear.
func (k *Keyring) Seal(plain, aad string) (string, error) {
	if !k.Enabled() {
		if IsSealed(plain) {
			return "", ErrLooksSealed
		}
		return plain, nil
	}
	nonce := make([]byte, k.current.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := k.current.aead.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return Prefix + k.current.id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns the clear value of stored: stored itself when it was kept in
// clear, else its decryption with the key its id names. keyID is that id
// ("" for a clear value).
func (k *Keyring) Open(stored, aad string) (plain, keyID string, err error) {
	if !IsSealed(stored) {
		return stored, "", nil
	}
	id, data, ok := strings.Cut(strings.TrimPrefix(stored, Prefix), ":")
	if !ok {
		return "", "", ErrCorrupt
	}
	if k == nil || len(k.keys) == 0 {
		return "", id, ErrNoKey
	}
	kk, ok := k.keys[id]
	if !ok {
		return "", id, fmt.Errorf("key id %s: %w", id, ErrUnknownKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(data)
	n := kk.aead.NonceSize()
	if err != nil || len(raw) < n+kk.aead.Overhead() {
		return "", id, ErrCorrupt
	}
	out, err := kk.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	if err != nil {
		return "", id, ErrCorrupt
	}
	return string(out), id, nil
}

// IsSealed reports whether a stored value is ciphertext.
func IsSealed(stored string) bool { return strings.HasPrefix(stored, Prefix) }

// StoredKeyID is the key id a stored value was sealed with, "" when clear.
func StoredKeyID(stored string) string {
	if !IsSealed(stored) {
		return ""
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(stored, Prefix), ":")
	return id
}
