package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/pki"
)

// Who may use the admin API, and how (Guard, in front of every route of a
// node's admin address: the API, /metrics and /debug/pprof):
//
//   - GET /healthz is open: it says only "ok".
//   - A request from another web origin is refused (403): one whose
//     Origin header is not the API's own scheme://host, or whose
//     Sec-Fetch-Site is cross-site. No CORS header is ever sent, so a
//     browser never lets a page of another origin read an answer either.
//   - Every other request is authenticated, reads too (they reveal names
//     and layouts): by a client certificate the cluster's CA signed
//     (verified in the TLS handshake) or by a bearer token (Authorization:
//     Bearer weft_…, weft token create). Without either: 401, saying how
//     to authenticate.
//   - An admin identity, a node identity (nodes route drive adds and
//     worker lists to each other) and a token may do everything; a client
//     identity (a mount) only GET /v1/node, which tells it how to reach
//     the control plane; anything else it asks is 403.
//   - A request that changes something (any method but GET and HEAD)
//     must carry Content-Type: application/json, bodyless or not (415
//     otherwise): an HTML form or a "simple" cross-origin request cannot
//     send it without a CORS preflight, which fails.
//
// A node run with --insecure serves plain HTTP and authenticates nobody
// (Guard.Insecure): the origin and content-type rules still hold.

// Principal is who made a request: a certificate's identity, or a token.
type Principal struct {
	// Identity is the client certificate's identity, zero for a token.
	Identity pki.Identity
	// Token is the token's name, "" for a certificate.
	Token string
}

// String names the principal in logs and records: "admin:alice" or
// "token:ci" ("anonymous" on an insecure node).
func (p Principal) String() string {
	switch {
	case p.Token != "":
		return "token:" + p.Token
	case p.Identity != (pki.Identity{}):
		return p.Identity.String()
	}
	return "anonymous"
}

type principalKey struct{}

// PrincipalOf returns the principal Guard authenticated for a request's
// context (zero on an insecure node).
func PrincipalOf(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// TokenVerifier checks a bearer token; *cluster.Store implements it.
type TokenVerifier interface {
	// VerifyToken returns the token's record, or an error wrapping
	// cluster.ErrBadToken if it is not a valid token of the cluster.
	VerifyToken(ctx context.Context, token string) (cluster.TokenRecord, error)
}

var _ TokenVerifier = (*cluster.Store)(nil)

// Guard authenticates and screens every request to a node's admin
// address before next sees it (see the rules above).
type Guard struct {
	// Tokens verifies bearer tokens; nil refuses them.
	Tokens TokenVerifier
	// Insecure serves without authentication (weft server --insecure).
	Insecure bool
	Log      *slog.Logger
}

// Wrap returns next behind the guard.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if msg := crossOrigin(r); msg != "" {
			writeError(w, http.StatusForbidden, "cross_origin", msg)
			return
		}
		p, code, msg := g.authenticate(r)
		if code != 0 {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
			}
			if g.Log != nil && code == http.StatusForbidden {
				g.Log.Warn("admin request refused", "method", r.Method, "path", r.URL.Path, "principal", p, "remote", r.RemoteAddr)
			}
			writeError(w, code, map[int]string{http.StatusUnauthorized: "unauthenticated", http.StatusForbidden: "forbidden"}[code], msg)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
					fmt.Sprintf("%s %s: a request that changes something must say Content-Type: application/json (it said %q)", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// authenticate returns the request's principal, or an HTTP status and
// why.
func (g Guard) authenticate(r *http.Request) (Principal, int, string) {
	if g.Insecure {
		return Principal{}, 0, ""
	}
	var p Principal
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		id, err := pki.PeerIdentity(*r.TLS)
		if err != nil {
			return p, http.StatusForbidden, fmt.Sprintf("the client certificate is not a weft identity: %v", err)
		}
		p.Identity = id
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			return p, http.StatusUnauthorized, "Authorization: want Bearer TOKEN (a token weft token create printed)"
		}
		if g.Tokens == nil {
			return p, http.StatusUnauthorized, "this node takes no tokens"
		}
		rec, err := g.Tokens.VerifyToken(r.Context(), strings.TrimSpace(tok))
		if errors.Is(err, cluster.ErrBadToken) {
			return p, http.StatusUnauthorized, err.Error()
		}
		if err != nil {
			return p, http.StatusServiceUnavailable, "checking the token: " + err.Error()
		}
		if p.Identity == (pki.Identity{}) {
			p.Token = rec.Name
		}
	}
	switch {
	case p.Token != "":
		return p, 0, ""
	case p.Identity == (pki.Identity{}):
		return p, http.StatusUnauthorized, "authentication required: present an admin certificate of the cluster (weft --pki DIR or $WEFT_PKI; " +
			"weft cert issue --admin NAME) or a bearer token (weft --token or $WEFT_TOKEN; weft token create)"
	case p.Identity.Kind == pki.KindAdmin, p.Identity.Kind == pki.KindNode:
		return p, 0, ""
	case p.Identity.Kind == pki.KindClient && r.Method == http.MethodGet && r.URL.Path == APIVersion+"/node":
		return p, 0, ""
	}
	return p, http.StatusForbidden, fmt.Sprintf("%s may not %s %s: a client identity only learns where the control plane is (GET %s/node); administer with an admin certificate or a token",
		p.Identity, r.Method, r.URL.Path, APIVersion)
}

// crossOrigin returns why a request comes from another web origin, or "".
func crossOrigin(r *http.Request) string {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "cross-site requests are refused (Sec-Fetch-Site: cross-site); use the weft CLI or a client that sends no Origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if u, err := url.Parse(origin); err != nil || u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("requests from another origin are refused (Origin %q is not %s://%s)", origin, scheme, r.Host)
	}
	return ""
}
