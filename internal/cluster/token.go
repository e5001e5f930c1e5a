package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bearer tokens of the admin API (weft token create|list|revoke).
//
// A token is "weft_" + ID + "_" + SECRET: ID is 16 hex digits naming its
// record, SECRET 43 characters of base64url (32 random bytes). The control
// plane keeps only the SHA-256 of the secret: the secret is random and
// long, so a fast hash is as good as a slow one, and a reader of the
// control plane (every weft identity may read it) learns nothing it can
// present. The token itself is shown once, when it is created.
//
// Keys (see schema.go):
//
//	/weft/tokens/<id>           TokenRecord
//	/weft/token-names/<name>    the id of the token called name (names
//	                            are unique, so that a token is revoked by
//	                            the name an administrator gave it)
const (
	prefixTokens     = Prefix + "tokens/"
	prefixTokenNames = Prefix + "token-names/"
	tokenPrefix      = "weft_"
)

// TokenRecord is a token's persistent record, format version 1 ("v").
type TokenRecord struct {
	V    int    `json:"v"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Hash is the hex SHA-256 of the token's secret.
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	// Expires is when the token stops working; zero: never.
	Expires time.Time `json:"expires,omitzero"`
	// CreatedBy is who created it (an identity, or another token's name).
	CreatedBy string `json:"created_by,omitempty"`
}

// Expired reports whether the token no longer works at now.
func (t TokenRecord) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

func tokenKey(id string) string       { return prefixTokens + id }
func tokenNameKey(name string) string { return prefixTokenNames + name }

// CreateToken makes a new token called name, valid for ttl (0: until
// revoked), and returns it — the only time it is seen — with its record.
// A name in use is ErrExists; an invalid name or a negative ttl
// ErrInvalid.
func (s *Store) CreateToken(ctx context.Context, name string, ttl time.Duration, by string) (string, TokenRecord, error) {
	if !ValidName(name) {
		return "", TokenRecord{}, fmt.Errorf("%w: token name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, name)
	}
	if ttl < 0 {
		return "", TokenRecord{}, fmt.Errorf("%w: token %s: negative lifetime %s", ErrInvalid, name, ttl)
	}
	var idb [8]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", TokenRecord{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", TokenRecord{}, err
	}
	id := hex.EncodeToString(idb[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	now := time.Now().UTC()
	rec := TokenRecord{V: RecordVersion, ID: id, Name: name, Hash: hashSecret(sec), Created: now, CreatedBy: by}
	if ttl > 0 {
		rec.Expires = now.Add(ttl)
	}
	t, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tokenNameKey(name)), "=", 0)).
		Then(clientv3.OpPut(tokenNameKey(name), id), clientv3.OpPut(tokenKey(id), encode(rec))).Commit()
	if err != nil {
		return "", TokenRecord{}, fmt.Errorf("cluster: create token %s: %w", name, err)
	}
	if !t.Succeeded {
		return "", TokenRecord{}, fmt.Errorf("%w: a token called %q exists: revoke it first (weft token revoke %s) or choose another name", ErrExists, name, name)
	}
	return tokenPrefix + id + "_" + sec, rec, nil
}

func hashSecret(sec string) string {
	h := sha256.Sum256([]byte(sec))
	return hex.EncodeToString(h[:])
}

// VerifyToken returns the record of token if it is one of the cluster's,
// not revoked and not expired; otherwise an error wrapping ErrBadToken
// that says which (never what the secret should have been).
func (s *Store) VerifyToken(ctx context.Context, token string) (TokenRecord, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, sec, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 16 || sec == "" {
		return TokenRecord{}, fmt.Errorf("%w: not a weft token (want weft_ID_SECRET, as weft token create prints it)", ErrBadToken)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return TokenRecord{}, fmt.Errorf("%w: not a weft token (bad id)", ErrBadToken)
	}
	var rec TokenRecord
	// An unknown id and a wrong secret read the same: the answer tells
	// a guesser nothing.
	unknown := fmt.Errorf("%w: token %s is unknown or revoked, or its secret is wrong", ErrBadToken, id)
	if _, err := s.getRecord(ctx, tokenKey(id), &rec); err == ErrNotFound {
		return TokenRecord{}, unknown
	} else if err != nil {
		return TokenRecord{}, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(sec)), []byte(rec.Hash)) != 1 {
		return TokenRecord{}, unknown
	}
	if rec.Expired(time.Now()) {
		return TokenRecord{}, fmt.Errorf("%w: token %s (%s) expired on %s: create another (weft token create)", ErrBadToken, id, rec.Name,
			rec.Expires.UTC().Format(time.RFC3339))
	}
	return rec, nil
}

// Tokens lists the tokens' records by name (expired ones too).
func (s *Store) Tokens(ctx context.Context) ([]TokenRecord, error) {
	var out []TokenRecord
	err := s.scan(ctx, prefixTokens, func(key string, val []byte) error {
		var rec TokenRecord
		if err := decode(key, val, &rec); err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// RevokeToken deletes the token called nameOrID (a name, or the id its
// record shows) and returns its record; it stops working at once. An
// unknown token is ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, nameOrID string) (TokenRecord, error) {
	toks, err := s.Tokens(ctx)
	if err != nil {
		return TokenRecord{}, err
	}
	for _, t := range toks {
		if t.Name != nameOrID && t.ID != nameOrID {
			continue
		}
		if _, err := s.cli.Txn(ctx).Then(clientv3.OpDelete(tokenKey(t.ID)), clientv3.OpDelete(tokenNameKey(t.Name))).Commit(); err != nil {
			return TokenRecord{}, fmt.Errorf("cluster: revoke token %s: %w", t.Name, err)
		}
		return t, nil
	}
	return TokenRecord{}, fmt.Errorf("%w: no token called %q (see weft token list)", ErrNotFound, nameOrID)
}
