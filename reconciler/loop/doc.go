// Package loop owns the polling loop that both front ends run, `cairn sync
// --interval` and `cairn controller`: it polls the branch, syncs a new head or a
// failed instance whose retry is due, checks drift on its interval, syncs at once when
// woken (a verified push webhook, a watched edit in the cluster, `cairn reconcile
// source`), and plans pull requests on a queue of their own, so that a plan never
// delays a sync.
package loop
