package containerd

// The labels a test of another package's view needs.
const (
	LabelOwner   = labelOwner
	LabelProcess = labelProcess
)
