package consent

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Tokens make and open the one-click unsubscribe tokens of emails (RFC
// 8058): an AES-256-GCM sealing of (workspace, address) under a key every
// process shares, so a token is unguessable, names its recipient without a
// lookup, and any change to it fails to open (404, nothing written).
type Tokens struct{ aead cipher.AEAD }

// TokenKeyID is the _id (in consent_keys) of the shared token key. The first process to start
// inserts a random key; every other reads the winner (a unique insert
// decides, as everywhere).
const TokenKeyID = "unsubscribe-token-key-v1"

// tokenAAD binds a sealed token to its purpose.
var tokenAAD = []byte("msgapi unsubscribe v1")

// Tokens loads the shared token key, creating it on first use.
func (s *Store) Tokens(ctx context.Context) (*Tokens, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	_, err := s.keys.InsertOne(ctx, bson.D{{Key: "_id", Value: TokenKeyID}, {Key: "key", Value: base64.StdEncoding.EncodeToString(key)}, {Key: "createdAt", Value: s.now()}})
	if err != nil && !store.IsDuplicateKey(err) {
		return nil, msgapi.Unavailable(fmt.Errorf("create unsubscribe token key: %w", err))
	}
	if err != nil {
		var doc struct {
			Key string `bson:"key"`
		}
		if err := s.keys.FindOne(ctx, store.ByID(TokenKeyID)).Decode(&doc); err != nil {
			return nil, msgapi.Unavailable(fmt.Errorf("read unsubscribe token key: %w", err))
		}
		if key, err = base64.StdEncoding.DecodeString(doc.Key); err != nil || len(key) != 32 {
			return nil, fmt.Errorf("the stored unsubscribe token key is not 32 bytes of base64")
		}
	}
	return NewTokens(key)
}

// NewTokens returns Tokens under a 32-byte key.
func NewTokens(key []byte) (*Tokens, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Tokens{aead: g}, nil
}

// Make returns the token of (workspace, address).
func (t *Tokens) Make(workspaceID, address string) string {
	nonce := make([]byte, t.aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := t.aead.Seal(nonce, nonce, []byte(workspaceID+"\x00"+address), tokenAAD)
	return base64.RawURLEncoding.EncodeToString(sealed)
}

// Open returns the (workspace, address) a token was made for; ok is false
// for anything Make did not produce with this key.
func (t *Tokens) Open(token string) (workspaceID, address string, ok bool) {
	if len(token) > 1024 {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	ns := t.aead.NonceSize()
	if err != nil || len(b) < ns+t.aead.Overhead() {
		return "", "", false
	}
	plain, err := t.aead.Open(nil, b[:ns], b[ns:], tokenAAD)
	if err != nil {
		return "", "", false
	}
	ws, addr, found := strings.Cut(string(plain), "\x00")
	if !found || ws == "" || addr == "" {
		return "", "", false
	}
	return ws, addr, true
}
