package notify

import (
	"errors"
	"testing"
	"time"
)

// The Standard Webhooks specification's test vector.
func TestSignVector(t *testing.T) {
	key, err := SecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, body)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	key, _ := SecretKey(NewSecret())
	other, _ := SecretKey(NewSecret())
	now := time.Unix(1700000000, 0)
	body := []byte(`{"a":1}`)
	sig := Sign(key, "evt_1", now, body)
	ts := "1700000000"
	tests := []struct {
		name         string
		id, ts, sigs string
		body         []byte
		at           time.Time
		want         error
	}{
		{"valid", "evt_1", ts, sig, body, now, nil},
		{"valid among several (rotation)", "evt_1", ts, Sign(other, "evt_1", now, body) + " " + sig, body, now, nil},
		{"body changed", "evt_1", ts, sig, []byte(`{"a":2}`), now, ErrBadSignature},
		{"id changed", "evt_2", ts, sig, body, now, ErrBadSignature},
		{"other key", "evt_1", ts, Sign(other, "evt_1", now, body), body, now, ErrBadSignature},
		{"too old", "evt_1", ts, sig, body, now.Add(6 * time.Minute), ErrStale},
		{"too new", "evt_1", ts, sig, body, now.Add(-6 * time.Minute), ErrStale},
		{"missing", "evt_1", ts, "", body, now, ErrNoSignature},
		{"timestamp not a number", "evt_1", "x", sig, body, now, ErrNoSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(key, tt.id, tt.ts, tt.sigs, tt.body, tt.at); !errors.Is(got, tt.want) {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSecretKey(t *testing.T) {
	if k, err := SecretKey(NewSecret()); err != nil || len(k) != 32 {
		t.Errorf("a new secret's key: %d bytes, %v; want 32", len(k), err)
	}
	if k, err := SecretKey("relay-secret"); err != nil || string(k) != "relay-secret" {
		t.Errorf("plain secret: %q %v, want its own bytes", k, err)
	}
	for _, bad := range []string{"", "whsec_", "whsec_!!!"} {
		if _, err := SecretKey(bad); err == nil {
			t.Errorf("SecretKey(%q): no error", bad)
		}
	}
}
