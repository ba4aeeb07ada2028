package notify

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

// endpointAAD binds a sealed endpoint secret to its endpoint: a ciphertext
// copied to another endpoint or workspace does not open.
func endpointAAD(workspaceID, endpointID string) string {
	return "msgapi/webhook-endpoint-secret/" + workspaceID + "/" + endpointID
}

// SecretReport counts the stored endpoint secrets by form.
type SecretReport struct {
	Clear      int
	ByKey      map[string]int
	Unreadable []string // key ids this keyring cannot open, sorted
}

// CheckSecrets reads every endpoint's secret and reports their forms, so
// that start-up refuses to run with secrets it cannot open.
func (o *Outbox) CheckSecrets(ctx context.Context) (SecretReport, error) {
	r := SecretReport{ByKey: map[string]int{}}
	bad := map[string]bool{}
	err := o.eachSecret(ctx, func(ep Endpoint) error {
		id := secrets.StoredKeyID(ep.Secret)
		if id == "" {
			r.Clear++
			return nil
		}
		r.ByKey[id]++
		if _, _, err := o.opts.Keyring.Open(ep.Secret, endpointAAD(ep.WorkspaceID, ep.ID)); err != nil && !bad[id] {
			bad[id] = true
			r.Unreadable = append(r.Unreadable, id)
		}
		return nil
	})
	sort.Strings(r.Unreadable)
	return r, err
}

// RotateReport is what RotateSecrets did.
type RotateReport struct {
	Resealed, Current, Changed int
}

// RotateSecrets re-seals every endpoint secret in clear or under a
// previous key with the current key; each write is conditional on the
// value read (Changed counts the ones that moved meanwhile).
func (o *Outbox) RotateSecrets(ctx context.Context) (RotateReport, error) {
	var r RotateReport
	kr := o.opts.Keyring
	if !kr.Enabled() {
		return r, errors.New("no key to encrypt with: set MSGAPI_SECRET_KEY (and the old key in MSGAPI_SECRET_KEY_PREVIOUS)")
	}
	err := o.eachSecret(ctx, func(ep Endpoint) error {
		if secrets.StoredKeyID(ep.Secret) == kr.CurrentID() {
			r.Current++
			return nil
		}
		aad := endpointAAD(ep.WorkspaceID, ep.ID)
		plain, _, err := kr.Open(ep.Secret, aad)
		if err != nil {
			return fmt.Errorf("the secret of webhook endpoint %s: %w", ep.ID, err)
		}
		sealed, err := kr.Seal(plain, aad)
		if err != nil {
			return fmt.Errorf("seal the secret of webhook endpoint %s: %w", ep.ID, err)
		}
		res, err := o.endpoints.UpdateOne(ctx, bson.D{{Key: "_id", Value: ep.ID}, {Key: "secret", Value: ep.Secret}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "secret", Value: sealed}}}})
		switch {
		case err != nil:
			return msgapi.Unavailable(fmt.Errorf("re-seal the secret of webhook endpoint %s: %w", ep.ID, err))
		case res.MatchedCount == 0:
			r.Changed++
		default:
			r.Resealed++
		}
		return nil
	})
	o.epCache.clear()
	return r, err
}

func (o *Outbox) eachSecret(ctx context.Context, f func(Endpoint) error) error {
	cur, err := o.endpoints.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "workspaceId", Value: 1}, {Key: "secret", Value: 1}}))
	if err != nil {
		return msgapi.Unavailable(fmt.Errorf("read webhook endpoints: %w", err))
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var ep Endpoint
		if err := cur.Decode(&ep); err != nil {
			return fmt.Errorf("decode webhook endpoint: %w", err)
		}
		if ep.Secret == "" {
			continue
		}
		if err := f(ep); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return msgapi.Unavailable(fmt.Errorf("read webhook endpoints: %w", err))
	}
	return nil
}
