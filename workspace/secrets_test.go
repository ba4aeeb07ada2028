package workspace_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

func testKeyring(t *testing.T, previous ...string) (*secrets.Keyring, string) {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key := base64.StdEncoding.EncodeToString(b)
	k, err := secrets.NewKeyring(key, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k, key
}

// storedSecret is the raw value in the workspaces collection.
func storedSecret(t *testing.T, st *store.Store, wsID, channel string) string {
	t.Helper()
	var doc struct {
		Secrets map[string]string `bson:"secrets"`
	}
	if err := st.Collection("workspaces").FindOne(context.Background(), bson.D{{Key: "_id", Value: wsID}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Secrets[channel]
}

const twilioToken = "f3b1c0ffee0123456789abcdef012345"

func TestSecretsAreSealedAtRest(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	k, _ := testKeyring(t)
	wss := workspace.NewStore(st, 0).WithKeyring(k)
	ws, _, err := wss.Create(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := wss.SetSecret(ctx, ws.ID, "twilio", twilioToken); err != nil {
		t.Fatal(err)
	}
	raw := storedSecret(t, st, ws.ID, "twilio")
	if strings.Contains(raw, twilioToken) || secrets.StoredKeyID(raw) != k.CurrentID() {
		t.Fatalf("stored %q: want ciphertext under key %s", raw, k.CurrentID())
	}
	got, err := wss.Get(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := wss.Secret(got, "twilio"); err != nil || plain != twilioToken {
		t.Errorf("Secret = %q, %v; want the token", plain, err)
	}
	if plain, err := wss.Secret(got, "slack"); err != nil || plain != "" {
		t.Errorf("unset secret = %q, %v; want empty", plain, err)
	}

	// Another process without the key, or with another key, fails plainly.
	for name, other := range map[string]*workspace.Store{
		"no key":      workspace.NewStore(st, 0),
		"another key": workspace.NewStore(st, 0).WithKeyring(func() *secrets.Keyring { k, _ := testKeyring(t); return k }()),
	} {
		if plain, err := other.Secret(got, "twilio"); err == nil || plain != "" || !strings.Contains(err.Error(), "MSGAPI_SECRET_KEY") {
			t.Errorf("%s: Secret = %q, %v; want an error naming MSGAPI_SECRET_KEY", name, plain, err)
		}
		rep, err := other.CheckSecrets(ctx)
		if err != nil || len(rep.Unreadable) != 1 || rep.Unreadable[0] != k.CurrentID() {
			t.Errorf("%s: CheckSecrets = %+v, %v; want key %s unreadable", name, rep, err, k.CurrentID())
		}
	}

	// A ciphertext moved to another workspace does not open there.
	other, _, _ := wss.Create(ctx, "Other")
	if _, err := st.Collection("workspaces").UpdateOne(ctx, bson.D{{Key: "_id", Value: other.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "secrets.twilio", Value: raw}}}}); err != nil {
		t.Fatal(err)
	}
	moved, _ := wss.Get(ctx, other.ID)
	if plain, err := wss.Secret(moved, "twilio"); err == nil {
		t.Errorf("a ciphertext copied to another workspace opened: %q", plain)
	}
}

func TestSecretsWithoutKeyAreClear(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	wss := workspace.NewStore(st, 0)
	ws, _, _ := wss.Create(ctx, "Acme")
	if err := wss.SetSecret(ctx, ws.ID, "twilio", twilioToken); err != nil {
		t.Fatal(err)
	}
	if raw := storedSecret(t, st, ws.ID, "twilio"); raw != twilioToken {
		t.Errorf("stored %q, want the clear token (no key configured)", raw)
	}
	err := wss.SetSecret(ctx, ws.ID, "slack", secrets.Prefix+"abc:def")
	if msgapi.ErrorCode(err) != msgapi.CodeInvalid {
		t.Errorf("clear secret that looks encrypted: %v, want invalid_request", err)
	}
}

// Rotation: clear secrets and secrets of the previous key are re-sealed with
// the current key; afterwards the current key alone opens every secret.
func TestRotateSecrets(t *testing.T) {
	st := storetest.New(t, workspace.Collections...)
	ctx := context.Background()
	clear := workspace.NewStore(st, 0)
	a, _, _ := clear.Create(ctx, "A")
	if err := clear.SetSecret(ctx, a.ID, "slack", "slack-secret"); err != nil {
		t.Fatal(err)
	}
	oldK, oldKey := testKeyring(t)
	old := workspace.NewStore(st, 0).WithKeyring(oldK)
	if err := old.SetSecret(ctx, a.ID, "twilio", twilioToken); err != nil {
		t.Fatal(err)
	}

	newK, newKey := testKeyring(t, oldKey)
	rotating := workspace.NewStore(st, 0).WithKeyring(newK)
	if rep, _ := rotating.CheckSecrets(ctx); rep.Stale(newK.CurrentID()) != 2 || len(rep.Unreadable) != 0 {
		t.Errorf("before: %+v, want 2 stale (one clear, one old key), none unreadable", rep)
	}
	r, err := rotating.RotateSecrets(ctx)
	if err != nil || r.Resealed != 2 || r.Changed != 0 {
		t.Fatalf("rotate = %+v, %v; want 2 re-sealed", r, err)
	}
	if r, err := rotating.RotateSecrets(ctx); err != nil || r.Resealed != 0 || r.Current != 2 {
		t.Errorf("second rotate = %+v, %v; want nothing left to do", r, err)
	}
	onlyNewK, err := secrets.NewKeyring(newKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew := workspace.NewStore(st, 0).WithKeyring(onlyNewK)
	ws, _ := onlyNew.Get(ctx, a.ID)
	for ch, want := range map[string]string{"slack": "slack-secret", "twilio": twilioToken} {
		if secrets.StoredKeyID(ws.Secrets[ch]) != newK.CurrentID() {
			t.Errorf("%s stored as %q, want sealed with the new key", ch, ws.Secrets[ch])
		}
		if got, err := onlyNew.Secret(ws, ch); err != nil || got != want {
			t.Errorf("%s with the new key alone = %q, %v", ch, got, err)
		}
	}
	if _, err := clear.RotateSecrets(ctx); err == nil || !strings.Contains(err.Error(), "MSGAPI_SECRET_KEY") {
		t.Errorf("rotate without a key: %v, want an error naming MSGAPI_SECRET_KEY", err)
	}
}
