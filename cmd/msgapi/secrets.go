package main

import (
	"context"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/workspace"
)

// secretsCmd: msgapi secrets rotate. Re-encrypts every stored workspace
// secret and event endpoint secret that is in clear or under a previous key with MSGAPI_SECRET_KEY
// (old keys in MSGAPI_SECRET_KEY_PREVIOUS). With the embedded engine and a
// server running, point MONGODB_URI at its socket.
func secretsCmd(ctx context.Context, v values, args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "rotate" {
		return fmt.Errorf("usage: msgapi secrets rotate [flags]")
	}
	cfg, err := parseConfig(v)
	if err != nil {
		return err
	}
	if !cfg.keyring.Enabled() {
		return fmt.Errorf("set MSGAPI_SECRET_KEY to the key to encrypt with (and the old ones in MSGAPI_SECRET_KEY_PREVIOUS)")
	}
	st, err := openStore(ctx, cfg, newLogger(io.Discard, "error"))
	if err != nil {
		return err
	}
	defer st.Close(context.WithoutCancel(ctx))
	r, err := workspace.NewStore(st, 0).WithKeyring(cfg.keyring).RotateSecrets(ctx)
	if err != nil {
		return err
	}
	// Event endpoint secrets (whsec_…) too.
	er, err := notify.New(notify.Options{Store: st, Log: zerolog.Nop(), Keyring: cfg.keyring}).RotateSecrets(ctx)
	if err != nil {
		return err
	}
	r.Resealed, r.Current, r.Changed = r.Resealed+er.Resealed, r.Current+er.Current, r.Changed+er.Changed
	fmt.Fprintf(stdout, "key %s: %d secrets re-encrypted, %d already current, %d changed meanwhile (run again)\n", cfg.keyring.CurrentID(), r.Resealed, r.Current, r.Changed)
	if r.Resealed == 0 && r.Changed == 0 {
		fmt.Fprintln(stdout, "every secret is under the current key: MSGAPI_SECRET_KEY_PREVIOUS can be removed")
	}
	return nil
}
