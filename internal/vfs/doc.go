// Package vfs is weft's POSIX file system over the namespace (package meta)
// and the data path (package client): open files, permission checks, time
// updates, setuid clearing — written once for every gateway (FUSE, NFS).
//
// It is not a protocol: gateways translate their requests into calls here
// and turn its errors into their own codes (errno, NFS status) at the edge.
package vfs
