package events

func init() {
	register[FileWritten]()
	register[FileCreated]()
	register[FolderCreated]()
	register[FileRenamed]()
	register[FileDeleted]()
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

// The operator's file tree changes through the file routes (the Files
// tree's new file, new folder, rename and delete), each recorded after it
// was made. Paths are relative to the Session root.

// FileCreated: an empty regular file was created at Path.
type FileCreated struct {
	Path string `json:"path"`
}

// FolderCreated: a directory was created at Path.
type FolderCreated struct {
	Path string `json:"path"`
}

// FileRenamed: the entry at From (a file, folder or symlink: Kind) was
// renamed or moved to To.
type FileRenamed struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// FileDeleted: the entry at Path (Kind) was deleted; Recursive when a
// folder was deleted with its contents.
type FileDeleted struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	Recursive bool   `json:"recursive,omitempty"`
}

func (FileCreated) EventType() string   { return "session-file-created" }
func (FolderCreated) EventType() string { return "session-folder-created" }
func (FileRenamed) EventType() string   { return "session-file-renamed" }
func (FileDeleted) EventType() string   { return "session-file-deleted" }
func (FileCreated) Aggregate() string   { return Session }
func (FolderCreated) Aggregate() string { return Session }
func (FileRenamed) Aggregate() string   { return Session }
func (FileDeleted) Aggregate() string   { return Session }
