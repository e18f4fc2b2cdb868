package events

func init() {
	register[WorkspaceRegistered]()
	register[WorkspaceRenamed]()
	register[WorkspaceRemoved]()
}

// WorkspaceRegistered: a directory became a Workspace. Path is canonical.
type WorkspaceRegistered struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

// WorkspaceRenamed: the display label changed; the path never does.
type WorkspaceRenamed struct {
	Name string `json:"name"`
}

// WorkspaceRemoved: a Workspace without Sessions was unregistered. Its
// directory is untouched.
type WorkspaceRemoved struct{}

func (WorkspaceRegistered) EventType() string { return "workspace-registered" }
func (WorkspaceRenamed) EventType() string    { return "workspace-renamed" }
func (WorkspaceRemoved) EventType() string    { return "workspace-removed" }

func (WorkspaceRegistered) Aggregate() string { return Workspace }
func (WorkspaceRenamed) Aggregate() string    { return Workspace }
func (WorkspaceRemoved) Aggregate() string    { return Workspace }
