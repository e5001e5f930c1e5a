package job

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Job data: what one phase of a job leaves for a later one. A phase that
// must see the whole job's findings before it acts (the tier job plans a
// migration over every candidate a parallel scan found) writes them as
// keyed values; later phases, on any node, read them back. The values
// live in etcd under the job (dataKey) and are deleted with its tasks
// when the job ends, and again when the job record itself is deleted (a
// worker still finishing an item of a cancelled job may write once more).
//
// Writes are blind puts: a phase's items are idempotent, so an item
// processed twice (after a steal, a crash, a pause) writes the same key
// with the same value. Values are opaque to the engine; the type that
// writes them versions their encoding.

// MaxDataValue bounds one value of job data: well under etcd's request
// limit, with room for the key and the transaction.
const MaxDataValue = 1 << 20

// ErrDataTooLarge is returned by PutData for a value over MaxDataValue.
var ErrDataTooLarge = errors.New("job: job data value too large")

// DataEntry is one key and value of a job's data.
type DataEntry struct {
	Key   string
	Value []byte
}

// dataKey is the etcd key of a job's data key k.
func dataKey(id JobID, k string) string { return prefixData + jobSuffix(id) + k }

// checkDataKey refuses an empty key or one with bytes that would not sort
// as the caller expects (keys are compared as bytes).
func checkDataKey(k string) error {
	if k == "" || len(k) > 512 || strings.ContainsRune(k, 0) {
		return fmt.Errorf("%w: job data key %q: 1-512 bytes, no NUL", ErrInvalid, k)
	}
	return nil
}

// PutData stores value under key k of job id's data, replacing what was
// there. Errors: ErrInvalid (bad key), ErrDataTooLarge, etcd's errors.
func (e *Engine) PutData(ctx context.Context, id JobID, k string, value []byte) error {
	if err := checkDataKey(k); err != nil {
		return err
	}
	if len(value) > MaxDataValue {
		return fmt.Errorf("%w: job %d key %s: %d bytes, at most %d", ErrDataTooLarge, id, k, len(value), MaxDataValue)
	}
	if _, err := e.cfg.Client.Put(ctx, dataKey(id, k), string(value)); err != nil {
		return fmt.Errorf("job: write job %d data %s: %w", id, k, err)
	}
	return nil
}

// DeleteData deletes key k of job id's data; a key that is not there is
// no error.
func (e *Engine) DeleteData(ctx context.Context, id JobID, k string) error {
	if err := checkDataKey(k); err != nil {
		return err
	}
	if _, err := e.cfg.Client.Delete(ctx, dataKey(id, k)); err != nil {
		return fmt.Errorf("job: delete job %d data %s: %w", id, k, err)
	}
	return nil
}

// GetData returns the value of key k of job id's data, and false if there
// is none.
func (e *Engine) GetData(ctx context.Context, id JobID, k string) ([]byte, bool, error) {
	if err := checkDataKey(k); err != nil {
		return nil, false, err
	}
	resp, err := e.cfg.Client.Get(ctx, dataKey(id, k))
	if err != nil {
		return nil, false, fmt.Errorf("job: read job %d data %s: %w", id, k, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// ListData returns up to limit entries of job id's data whose keys start
// with prefix and sort after after ("" for the first), in key order.
// Fewer than limit means there are no more. A limit below 1 is
// ErrInvalid.
func (e *Engine) ListData(ctx context.Context, id JobID, prefix, after string, limit int) ([]DataEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: job data list limit %d: want at least 1", ErrInvalid, limit)
	}
	base := prefixData + jobSuffix(id)
	from := base + prefix
	if after != "" {
		if !strings.HasPrefix(after, prefix) {
			return nil, fmt.Errorf("%w: job data list: after %q is not under prefix %q", ErrInvalid, after, prefix)
		}
		from = base + after + "\x00"
	}
	resp, err := e.cfg.Client.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(base+prefix)), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("job: list job %d data %s: %w", id, prefix, err)
	}
	out := make([]DataEntry, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = DataEntry{Key: strings.TrimPrefix(string(kv.Key), base), Value: kv.Value}
	}
	return out, nil
}

// deleteDataOp deletes all of job id's data.
func deleteDataOp(id JobID) clientv3.Op {
	return clientv3.OpDelete(prefixData+jobSuffix(id), clientv3.WithPrefix())
}
