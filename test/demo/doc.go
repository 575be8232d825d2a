// Package demo tests `make demo` as the README runs it: two demos side by side on
// one machine, each with its own state directory, registry and replica ports.
package demo
