// Package admin is weft's administrative HTTP API (JSON over HTTP, served by
// every node) and the Go client the CLI uses.
//
// It is not the control plane itself: handlers translate requests into
// calls on package cluster and turn its errors into HTTP statuses.
package admin
