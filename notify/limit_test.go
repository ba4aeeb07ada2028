package notify

import (
	"context"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store/storetest"
)

// The endpoint limit holds under concurrency: 40 creates released together
// leave exactly MaxEndpoints, and a deleted endpoint frees its place.
func TestEndpointLimitUnderConcurrency(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	const n = 2 * MaxEndpoints
	var wg sync.WaitGroup
	start := make(chan struct{})
	var mu sync.Mutex
	var created []Endpoint
	for range n {
		wg.Go(func() {
			<-start
			ep, err := ob.CreateEndpoint(ctx, "ws_a", EndpointInput{URL: "https://hooks.example.com/x"})
			if err == nil {
				mu.Lock()
				created = append(created, ep)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	stored, _ := st.Collection(collEndpoints).CountDocuments(ctx, bson.D{{Key: "workspaceId", Value: "ws_a"}})
	if len(created) != MaxEndpoints || stored != MaxEndpoints {
		t.Fatalf("%d parallel creates: %d succeeded, %d stored; want %d and %d", n, len(created), stored, MaxEndpoints, MaxEndpoints)
	}
	if _, err := ob.CreateEndpoint(ctx, "ws_a", EndpointInput{URL: "https://hooks.example.com/x"}); err == nil {
		t.Error("a create past the limit succeeded")
	}
	if err := ob.DeleteEndpoint(ctx, "ws_a", created[3].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.CreateEndpoint(ctx, "ws_a", EndpointInput{URL: "https://hooks.example.com/x"}); err != nil {
		t.Errorf("a create after a delete: %v", err)
	}
	if _, err := ob.CreateEndpoint(ctx, "ws_b", EndpointInput{URL: "https://hooks.example.com/x"}); err != nil {
		t.Errorf("another workspace: %v", err)
	}
}
