// Package attachments keeps the files a user attaches to a Session's turns:
// upload, consume, pin and remove, with the bytes in the blob store.
package attachments
