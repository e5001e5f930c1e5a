// Package pki is a weft cluster's certificate authority and the TLS
// configurations built on it: it makes the cluster's CA, issues node,
// client (mount) and admin certificates signed by it, keeps them in files
// (keys 0600), reloads them when they are replaced (rotation without a
// restart), and tells which identity a verified peer has.
//
// It uses the standard library's crypto/x509 and crypto/tls only; it is
// not a general-purpose PKI (no revocation lists: a cluster rotates its CA
// instead) and it does not decide who may do what (the services do, from
// the peer's Identity).
package pki
