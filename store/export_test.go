package store

import "context"

// IDLookupPlan exposes the query plan check to the external test package.
func IDLookupPlan(ctx context.Context, s *Store, coll string) (string, error) {
	return idLookupPlan(ctx, s.sqlite, coll)
}

// DBOptions exposes dbOptions to the tests.
var DBOptions = dbOptions
