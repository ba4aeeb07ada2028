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
type SecretReport = secrets.Report

// CheckSecrets reads every workspace's secrets (a scan: workspaces are few)
// and reports their forms, so that start-up can refuse to run with secrets
// it cannot open rather than fail webhook by webhook.
func (s *Store) CheckSecrets(ctx context.Context) (SecretReport, error) {
	return s.keyring.Check(s.eachSecret(ctx))
}

// RotateReport is what RotateSecrets did.
type RotateReport = secrets.RotateReport

// RotateSecrets re-seals every channel secret that is in clear or sealed
// with a previous key, with the current key (secrets.Keyring.Rotate: each
// write is conditional on the value it read).
func (s *Store) RotateSecrets(ctx context.Context) (RotateReport, error) {
	return s.keyring.Rotate(s.eachSecret(ctx), func(st secrets.Stored, sealed string) (bool, error) {
		res, err := s.workspaces.UpdateOne(ctx, bson.D{{Key: "_id", Value: st.DocID}, {Key: st.Field, Value: st.Value}},
			bson.D{{Key: "$set", Value: bson.D{{Key: st.Field, Value: sealed}}}})
		if err != nil {
			return false, msgapi.Unavailable(fmt.Errorf("re-seal %s: %w", st.Name, err))
		}
		return res.MatchedCount > 0, nil
	})
}

// eachSecret yields every channel secret of every workspace.
func (s *Store) eachSecret(ctx context.Context) secrets.Each {
	return func(f func(secrets.Stored) error) error {
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
				st := secrets.Stored{Value: ws.Secrets[ch], AAD: secretAAD(ws.ID, ch), Name: "the " + ch + " secret of workspace " + ws.ID,
					DocID: ws.ID, Field: "secrets." + ch}
				if err := f(st); err != nil {
					return err
				}
			}
		}
		if err := cur.Err(); err != nil {
			return msgapi.Unavailable(fmt.Errorf("read workspaces: %w", err))
		}
		return nil
	}
}
