package test

import (
	"context"
	"net/http"
	"testing"

	"github.com/msgapi/msgapi/test/client"
)

// TestClientSendsMessage uses the client generated from openapi.yaml
// (test/client) against the real binary: create a workspace, send,
// replay with the same Idempotency-Key, get the duplicate answer, read the
// message back and read a validation problem.
func TestClientSendsMessage(t *testing.T) {
	p := start(t, embeddedEnv(t, t.TempDir()))
	ctx := context.Background()
	bearer := func(token string) client.ClientOption {
		return client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		})
	}

	adm, err := client.NewClientWithResponses(p.url, bearer(admin))
	if err != nil {
		t.Fatal(err)
	}
	created, err := adm.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Client"})
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create workspace: %v %d %s", err, created.StatusCode(), created.Body)
	}

	c, err := client.NewClientWithResponses(p.url, bearer(created.JSON201.ApiKey))
	if err != nil {
		t.Fatal(err)
	}
	phone, key := "+1 (555) 010-0042", "client-test-1"
	req := client.SendRequest{Channel: client.SendRequestChannelSms, RecipientPhone: &phone, Body: "Sent by the generated client"}
	sent, err := c.SendMessageWithResponse(ctx, &client.SendMessageParams{IdempotencyKey: &key}, req)
	if err != nil || sent.JSON201 == nil {
		t.Fatalf("send: %v %d %s", err, sent.StatusCode(), sent.Body)
	}
	m := sent.JSON201.Message
	if sent.JSON201.Status != "sent" || m.Status != client.MessageStatusSent || m.RecipientPhone == nil || *m.RecipientPhone != "+15550100042" {
		t.Errorf("sent: status %s, message %+v", sent.JSON201.Status, m)
	}

	replay, err := c.SendMessageWithResponse(ctx, &client.SendMessageParams{IdempotencyKey: &key}, req)
	if err != nil || replay.JSON201 == nil || replay.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" || replay.JSON201.Message.Id != m.Id {
		t.Errorf("replay: %v %d %v %s", err, replay.StatusCode(), replay.HTTPResponse.Header, replay.Body)
	}

	dup, err := c.SendMessageWithResponse(ctx, nil, req)
	if err != nil || dup.JSON200 == nil {
		t.Fatalf("duplicate: %v %d %s", err, dup.StatusCode(), dup.Body)
	}
	d, err := dup.JSON200.AsDuplicateResponse()
	if err != nil || !bool(d.DuplicateOnly) || d.Message.Id != m.Id {
		t.Errorf("duplicate: %v %+v, want the original %s", err, d, m.Id)
	}

	got, err := c.GetMessageWithResponse(ctx, m.Id)
	if err != nil || got.JSON200 == nil || got.JSON200.Message.Id != m.Id || got.JSON200.Message.Body != req.Body {
		t.Errorf("get: %v %d %s", err, got.StatusCode(), got.Body)
	}

	bad, err := c.SendMessageWithResponse(ctx, nil, client.SendRequest{Channel: client.SendRequestChannelEmail, Body: "no recipient"})
	if err != nil || bad.ApplicationproblemJSON400 == nil || bad.ApplicationproblemJSON400.Errors == nil ||
		(*bad.ApplicationproblemJSON400.Errors)[0].Field != "recipientEmail" {
		t.Errorf("invalid: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
}
