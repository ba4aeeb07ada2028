package notify

import (
	"context"
	"fmt"

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
type SecretReport = secrets.Report

// CheckSecrets reads every endpoint's secret and reports their forms, so
// that start-up refuses to run with secrets it cannot open.
func (o *Outbox) CheckSecrets(ctx context.Context) (SecretReport, error) {
	return o.opts.Keyring.Check(o.eachSecret(ctx))
}

// RotateReport is what RotateSecrets did.
type RotateReport = secrets.RotateReport

// RotateSecrets re-seals every endpoint secret in clear or under a
// previous key with the current key; each write is conditional on the
// value read (Changed counts the ones that moved meanwhile).
func (o *Outbox) RotateSecrets(ctx context.Context) (RotateReport, error) {
	r, err := o.opts.Keyring.Rotate(o.eachSecret(ctx), func(st secrets.Stored, sealed string) (bool, error) {
		res, err := o.endpoints.UpdateOne(ctx, bson.D{{Key: "_id", Value: st.DocID}, {Key: st.Field, Value: st.Value}},
			bson.D{{Key: "$set", Value: bson.D{{Key: st.Field, Value: sealed}}}})
		if err != nil {
			return false, msgapi.Unavailable(fmt.Errorf("re-seal %s: %w", st.Name, err))
		}
		return res.MatchedCount > 0, nil
	})
	o.epCache.clear()
	return r, err
}

// eachSecret yields every endpoint's secret.
func (o *Outbox) eachSecret(ctx context.Context) secrets.Each {
	return func(f func(secrets.Stored) error) error {
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
			st := secrets.Stored{Value: ep.Secret, AAD: endpointAAD(ep.WorkspaceID, ep.ID), Name: "the secret of webhook endpoint " + ep.ID,
				DocID: ep.ID, Field: "secret"}
			if err := f(st); err != nil {
				return err
			}
		}
		if err := cur.Err(); err != nil {
			return msgapi.Unavailable(fmt.Errorf("read webhook endpoints: %w", err))
		}
		return nil
	}
}
