package events

func init() {
	register[FileWritten]()
}

// FileWritten: an operator replaced a Session file through the file route
// (the editor's save). It records what was written, not the bytes: Path is
// relative to the Session root, SHA256 and Size describe the new content,
// and ExpectedSHA256 is the hash the client said it last read (its conflict
// check), "" when it sent none.
type FileWritten struct {
	Path           string `json:"path"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	ExpectedSHA256 string `json:"expected_sha256,omitempty"`
}

func (FileWritten) EventType() string { return "session-file-written" }
func (FileWritten) Aggregate() string { return Session }
