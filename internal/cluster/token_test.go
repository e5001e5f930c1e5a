package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// Tokens: created once with a unique name, verified by their secret,
// refused when wrong, expired or revoked; the control plane holds no
// secret.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	s, err := Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	tok, rec, err := s.CreateToken(ctx, "ci", 0, "admin:alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "weft_"+rec.ID+"_") || rec.Name != "ci" || !rec.Expires.IsZero() || rec.CreatedBy != "admin:alice" {
		t.Fatalf("token %q, record %+v", tok, rec)
	}
	if _, _, err := s.CreateToken(ctx, "ci", 0, ""); !errors.Is(err, ErrExists) {
		t.Fatalf("second token called ci: %v", err)
	}
	for _, bad := range []string{"", "Bad Name", strings.Repeat("x", 64)} {
		if _, _, err := s.CreateToken(ctx, bad, 0, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("token name %q: %v", bad, err)
		}
	}
	if got, err := s.VerifyToken(ctx, tok); err != nil || got.ID != rec.ID {
		t.Fatalf("verify: %+v, %v", got, err)
	}
	// The secret is nowhere in the control plane.
	// (Cut at the id, not at the last "_": the secret is base64url, whose
	// alphabet has "_", and a suffix of it can be anywhere by chance.)
	secret := strings.TrimPrefix(tok, "weft_"+rec.ID+"_")
	all, err := cli.Get(ctx, Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if strings.Contains(string(kv.Value), secret) {
			t.Fatalf("%s holds the secret", kv.Key)
		}
	}
	for _, bad := range []string{"", "weft_", "weft_" + rec.ID + "_", tok[:len(tok)-1] + other(tok[len(tok)-1:]), "weft_0123456789abcdef_" + secret, "Bearer " + tok} {
		if _, err := s.VerifyToken(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("verify %q: %v", bad, err)
		}
	}
	short, srec, err := s.CreateToken(ctx, "short", time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyToken(ctx, short); err != nil {
		t.Fatalf("token valid for an hour: %v", err)
	}
	srec.Expires = time.Now().Add(-time.Minute) // as if the hour had passed
	if _, err := cli.Put(ctx, tokenKey(srec.ID), encode(srec)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyToken(ctx, short); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
	list, err := s.Tokens(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "ci" || list[1].Name != "short" {
		t.Fatalf("Tokens = %+v, %v", list, err)
	}
	if _, err := s.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyToken(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("revoked token: %v", err)
	}
	if _, err := s.RevokeToken(ctx, list[1].ID); err != nil { // by id
		t.Fatal(err)
	}
	if _, err := s.RevokeToken(ctx, "ci"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, _, err := s.CreateToken(ctx, "ci", 0, ""); err != nil { // the name is free again
		t.Fatal(err)
	}
}

// other returns a one-character string that is not c.
func other(c string) string {
	if c == "x" {
		return "y"
	}
	return "x"
}
