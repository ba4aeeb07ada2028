package workspace

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/secrets"
)

// A workspace's channel secrets are sealed with the keyring (AES-256-GCM,
// bound to workspace and channel) when one is configured, and stored in
// clear otherwise. Reads go through Secret, which opens either form.

// WithKeyring makes s seal the secrets it writes with k and open the ones
// it reads; nil keeps them in clear. Call it once, while wiring.
func (s *Store) WithKeyring(k *secrets.Keyring) *Store {
	s.keyring = k
	return s
}

// secretAAD binds a sealed secret to its place: a ciphertext copied to
// another workspace or channel does not open.
func secretAAD(workspaceID, channel string) string {
	return "msgapi/workspace-secret/" + workspaceID + "/" + channel
}

func (s *Store) seal(id, channel, secret string) (string, error) {
	stored, err := s.keyring.Seal(secret, secretAAD(id, channel))
	switch {
	case errors.Is(err, secrets.ErrLooksSealed):
		return "", &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the secret cannot be stored", Err: err,
			Fields: []msgapi.FieldError{{Field: "secret", Message: err.Error()}}}
	case err != nil:
		return "", fmt.Errorf("seal the %s secret of %s: %w", channel, id, err)
	}
	return stored, nil
}

// Secret is the clear secret of ws for channel, "" when none is set. A
// sealed secret this process has no key for is an internal error that names
// the missing key id (logged, never shown), not a wrong secret.
func (s *Store) Secret(ws Workspace, channel string) (string, error) {
	stored := ws.Secrets[channel]
	if stored == "" {
		return "", nil
	}
	plain, _, err := s.keyring.Open(stored, secretAAD(ws.ID, channel))
	if err != nil {
		return "", fmt.Errorf("the %s secret of workspace %s cannot be decrypted: %w", channel, ws.ID, err)
	}
	return plain, nil
}

// SecretReport counts the stored channel secrets by form.
type SecretReport struct {
	Clear int // stored in clear
	// ByKey counts sealed secrets per key id.
	ByKey map[string]int
	// Unreadable lists the key ids of sealed secrets this keyring cannot
	// open, sorted.
	Unreadable []string
}

// Stale is how many secrets are not sealed with the current key: in clear,
// or under a previous key. `msgapi secrets rotate` re-seals them.
func (r SecretReport) Stale(current string) int {
	n := r.Clear
	for id, c := range r.ByKey {
		if id != current {
			n += c
		}
	}
	return n
}

// CheckSecrets reads every workspace's secrets (a scan: workspaces are few)
// and reports their forms, so that start-up can refuse to run with secrets
// it cannot open rather than fail webhook by webhook.
func (s *Store) CheckSecrets(ctx context.Context) (SecretReport, error) {
	r := SecretReport{ByKey: map[string]int{}}
	unreadable := map[string]bool{}
	err := s.eachSecret(ctx, func(wsID, channel, stored string) error {
		id := secrets.StoredKeyID(stored)
		if id == "" {
			r.Clear++
			return nil
		}
		r.ByKey[id]++
		if _, _, err := s.keyring.Open(stored, secretAAD(wsID, channel)); err != nil && !unreadable[id] {
			unreadable[id] = true
			r.Unreadable = append(r.Unreadable, id)
		}
		return nil
	})
	sort.Strings(r.Unreadable)
	return r, err
}

// RotateReport is what RotateSecrets did.
type RotateReport struct {
	Resealed int // re-encrypted with the current key (from clear or an older key)
	Current  int // already sealed with the current key
	// Changed secrets were replaced (through the admin API) while the
	// rotation ran, so they were left alone; run it again.
	Changed int
}

// RotateSecrets re-seals every channel secret that is in clear or sealed
// with a previous key, with the current key. Each write is conditional on
// the value it read, so a secret changed meanwhile is left as changed (on
// the embedded engine a conditional update is not atomic: do not change
// secrets through the admin API while it runs). Run it until Resealed and
// Changed are 0; then the previous keys can be dropped.
func (s *Store) RotateSecrets(ctx context.Context) (RotateReport, error) {
	var r RotateReport
	if !s.keyring.Enabled() {
		return r, errors.New("no key to encrypt with: set MSGAPI_SECRET_KEY (and the old key in MSGAPI_SECRET_KEY_PREVIOUS)")
	}
	err := s.eachSecret(ctx, func(wsID, channel, stored string) error {
		if secrets.StoredKeyID(stored) == s.keyring.CurrentID() {
			r.Current++
			return nil
		}
		plain, _, err := s.keyring.Open(stored, secretAAD(wsID, channel))
		if err != nil {
			return fmt.Errorf("the %s secret of workspace %s: %w", channel, wsID, err)
		}
		sealed, err := s.seal(wsID, channel, plain)
		if err != nil {
			return err
		}
		field := "secrets." + channel
		res, err := s.workspaces.UpdateOne(ctx, bson.D{{Key: "_id", Value: wsID}, {Key: field, Value: stored}},
			bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: sealed}}}})
		switch {
		case err != nil:
			return msgapi.Unavailable(fmt.Errorf("re-seal the %s secret of %s: %w", channel, wsID, err))
		case res.MatchedCount == 0:
			r.Changed++
		default:
			r.Resealed++
		}
		return nil
	})
	return r, err
}

func (s *Store) eachSecret(ctx context.Context, f func(wsID, channel, stored string) error) error {
	cur, err := s.workspaces.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "secrets", Value: 1}}))
	if err != nil {
		return msgapi.Unavailable(fmt.Errorf("read workspaces: %w", err))
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var ws Workspace
		if err := cur.Decode(&ws); err != nil {
			return fmt.Errorf("decode workspace: %w", err)
		}
		chans := make([]string, 0, len(ws.Secrets))
		for ch := range ws.Secrets {
			chans = append(chans, ch)
		}
		sort.Strings(chans)
		for _, ch := range chans {
			if ws.Secrets[ch] == "" {
				continue
			}
			if err := f(ws.ID, ch, ws.Secrets[ch]); err != nil {
				return err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return msgapi.Unavailable(fmt.Errorf("read workspaces: %w", err))
	}
	return nil
}
