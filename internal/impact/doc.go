// Package impact is the job engine's impact control: impact policies (a
// level per time-of-week window, stored in etcd), the levels' worker bounds
// and load thresholds, the client latency targets, the node's load sampler
// (CPU, drive IOPS and queue depth), and the controller that turns them and
// the pools' client latency into each job's allowance of workers and duty
// cycle (it implements job.Throttle).
//
// It is not the job engine (package job runs jobs and asks a Throttle), not
// the measurement of client latency (package qos keeps it, package server
// carries it between nodes) and not the policy language of storage pools
// (package policy).
package impact
