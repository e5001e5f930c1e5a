// Package job is weft's background job engine: an elected coordinator that
// schedules jobs and splits their phases into tasks, a director per node that
// runs a manager per running job, and managers whose workers claim tasks,
// process them one item per step, checkpoint them in etcd and steal from
// each other; state and the key schema live in etcd (schema.go).
//
// It is not a set of job types (repair, drain, ... live in package jobs and
// plug in through Type) and it imports no domain package: what a job type
// needs from the node reaches it through Env.
package job
