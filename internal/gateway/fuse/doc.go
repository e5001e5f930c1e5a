// Package fuse serves a weft namespace to the kernel through FUSE
// (github.com/hanwen/go-fuse/v2, raw protocol), with node ids equal to LINs.
//
// It is a translation layer only: POSIX semantics live in package vfs, the
// only weft package it imports, and this package turns vfs's error classes
// into errno in one place (errno.go).
package fuse
