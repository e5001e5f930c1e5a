// Package kv is weft's transactional key-value interface: ordered byte keys,
// Get/Put/Delete/Scan inside optimistic transactions that are retried on
// conflict, plus the backend-independent transaction machinery (read set,
// buffered writes, retry loop, size limits) that backends share.
//
// It is not a key schema and knows no weft domain type: the namespace lives in
// package meta, and the storage engines live in kv/etcdkv and kv/memkv.
package kv
