// Package vfs is weft's POSIX file system over the namespace (package meta)
// and the data path (package client): open files, permission checks, time
// updates, setuid clearing — written once for every gateway (FUSE, NFS, S3).
//
// It is the whole API of the data edges: a gateway imports vfs and its
// protocol library, nothing else of weft (internal/layering checks it).
// So vfs speaks its own types — LIN, Attr, FileType, DirEntry, CreateArgs,
// SetAttrMask, RenameFlags, XattrFlags, AllocMode, Caller (WithCaller),
// Handle — converted from meta's in one file (convert.go), and its own error classes
// (ErrNotFound, ErrAccess, ErrNoSpace, …), into which it translates the
// errors of meta and client at its boundary in one table (errors.go),
// keeping their messages. Only Config, which the wiring (package mount)
// fills in, names the layers below.
//
// It is not a protocol: gateways translate their requests into calls here
// and turn its error classes into their own codes (errno, NFS status) at
// the edge.
package vfs
