// Package ways is the Ways capability: start N isolated Attempts of one
// task, verify, judge and price them, and keep one (durable Keep phases) or
// discard them all.
package ways
