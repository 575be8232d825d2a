// Package valuesfrom owns the values an instance's render reads from the cluster:
// spec.valuesFrom, YAML objects under keys of Secrets in the instance's namespace,
// merged in order under spec.values; and the masking of those Secrets' strings in
// every message, plan and status that could show them.
package valuesfrom
