// Package files writes a Session's files and tree (create, rename, delete,
// save) as bracketed effects, confined to the checkout and never inside
// .git.
package files
