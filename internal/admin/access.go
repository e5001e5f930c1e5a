package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/pki"
)

// Tokens and identities: the API's own access control (see auth.go).

// TokenView is a token as GET /v1/tokens lists it: its record without the
// secret's hash.
type TokenView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires,omitzero"`
	CreatedBy string    `json:"created_by,omitempty"`
	Expired   bool      `json:"expired,omitempty"`
}

func tokenView(r cluster.TokenRecord) TokenView {
	return TokenView{ID: r.ID, Name: r.Name, Created: r.Created, Expires: r.Expires, CreatedBy: r.CreatedBy, Expired: r.Expired(time.Now())}
}

// CreateTokenRequest is the body of POST /v1/tokens: a token called Name,
// valid for ExpiresIn (a Go duration, "720h"; "" or "0": until revoked).
type CreateTokenRequest struct {
	Name      string `json:"name"`
	ExpiresIn string `json:"expires_in,omitempty"`
}

// CreateTokenReply is the answer of POST /v1/tokens: the token, shown
// this once, and its record.
type CreateTokenReply struct {
	Token string    `json:"token"`
	View  TokenView `json:"record"`
}

// RegisterIdentityRequest is the body of POST /v1/identities: give the
// identity KIND:NAME its etcd user (see cluster.RegisterIdentity).
type RegisterIdentityRequest struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// accessRoutes adds:
//
//	GET  /v1/tokens                  []TokenView
//	POST /v1/tokens                  CreateTokenRequest → CreateTokenReply
//	POST /v1/tokens/{name}/revoke    TokenView of the revoked token (name or id)
//	GET  /v1/identities              []cluster.IdentityUser: the identities etcd admits
//	POST /v1/identities              RegisterIdentityRequest → cluster.IdentityUser
//
// On a node run with --insecure they answer 409: nobody is authenticated,
// so tokens and identities would protect nothing.
func (h *handler) accessRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIVersion+"/tokens", h.secure(func(ctx context.Context, r *http.Request) (any, error) {
		recs, err := h.store.Tokens(ctx)
		out := make([]TokenView, 0, len(recs))
		for _, t := range recs {
			out = append(out, tokenView(t))
		}
		return out, err
	}))
	mux.HandleFunc("POST "+APIVersion+"/tokens", h.secure(func(ctx context.Context, r *http.Request) (any, error) {
		var req CreateTokenRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		var ttl time.Duration
		if req.ExpiresIn != "" {
			var err error
			if ttl, err = time.ParseDuration(req.ExpiresIn); err != nil || ttl < 0 {
				return nil, fmt.Errorf("%w: expires_in %q: want a duration such as 720h (0: never)", cluster.ErrInvalid, req.ExpiresIn)
			}
		}
		by := PrincipalOf(r.Context()).String()
		tok, rec, err := h.store.CreateToken(ctx, req.Name, ttl, by)
		if err != nil {
			return nil, err
		}
		h.log.Info("token created", "token", rec.Name, "id", rec.ID, "expires", rec.Expires, "by", by)
		return created{CreateTokenReply{Token: tok, View: tokenView(rec)}}, nil
	}))
	mux.HandleFunc("POST "+APIVersion+"/tokens/{name}/revoke", h.secure(func(ctx context.Context, r *http.Request) (any, error) {
		rec, err := h.store.RevokeToken(ctx, r.PathValue("name"))
		if err == nil {
			h.log.Info("token revoked", "token", rec.Name, "id", rec.ID, "by", PrincipalOf(r.Context()).String())
		}
		return tokenView(rec), err
	}))
	mux.HandleFunc("GET "+APIVersion+"/identities", h.secure(func(ctx context.Context, r *http.Request) (any, error) {
		return cluster.Identities(ctx, h.store.Client())
	}))
	mux.HandleFunc("POST "+APIVersion+"/identities", h.secure(func(ctx context.Context, r *http.Request) (any, error) {
		var req RegisterIdentityRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		id, err := pki.ParseIdentity(req.Kind + ":" + req.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", cluster.ErrInvalid, err)
		}
		if err := cluster.RegisterIdentity(ctx, h.store.Client(), id); err != nil {
			return nil, err
		}
		h.log.Info("identity registered", "identity", id, "role", cluster.RoleOf(id.Kind), "by", PrincipalOf(r.Context()).String())
		return created{cluster.IdentityUser{Identity: id, Roles: []string{cluster.RoleOf(id.Kind)}}}, nil
	}))
}

// secure serves fn on a node with TLS, and refuses it on an insecure one.
func (h *handler) secure(fn func(context.Context, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.insecure {
			writeError(w, http.StatusConflict, "insecure", fmt.Sprintf("node %s runs without TLS (--insecure) and authenticates nobody: tokens and identities protect nothing here", h.node.Name))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := fn(ctx, r)
		h.reply(w, r, v, err)
	}
}

// Tokens lists the API's bearer tokens.
func (c *Client) Tokens(ctx context.Context) ([]TokenView, error) {
	var v []TokenView
	return v, c.do(ctx, http.MethodGet, APIVersion+"/tokens", nil, &v)
}

// CreateToken makes a bearer token called name, valid for expiresIn ("":
// until revoked), and returns it: the only time it is shown.
func (c *Client) CreateToken(ctx context.Context, name, expiresIn string) (CreateTokenReply, error) {
	var v CreateTokenReply
	return v, c.do(ctx, http.MethodPost, APIVersion+"/tokens", CreateTokenRequest{Name: name, ExpiresIn: expiresIn}, &v)
}

// RevokeToken revokes the token called (or with the id) nameOrID.
func (c *Client) RevokeToken(ctx context.Context, nameOrID string) (TokenView, error) {
	var v TokenView
	return v, c.do(ctx, http.MethodPost, APIVersion+"/tokens/"+nameOrID+"/revoke", nil, &v)
}

// Identities lists the identities the control plane admits.
func (c *Client) Identities(ctx context.Context) ([]cluster.IdentityUser, error) {
	var v []cluster.IdentityUser
	return v, c.do(ctx, http.MethodGet, APIVersion+"/identities", nil, &v)
}

// RegisterIdentity gives identity id its etcd user.
func (c *Client) RegisterIdentity(ctx context.Context, id pki.Identity) (cluster.IdentityUser, error) {
	var v cluster.IdentityUser
	return v, c.do(ctx, http.MethodPost, APIVersion+"/identities", RegisterIdentityRequest{Kind: string(id.Kind), Name: id.Name}, &v)
}
