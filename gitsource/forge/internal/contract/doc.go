// Package contract serves recorded API exchanges for the forge backends'
// tests: an httptest server that expects a script of requests in order,
// checks each one's method, escaped path, query, headers and JSON body, and
// answers with the recorded status, headers and body.
package contract
