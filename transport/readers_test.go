package transport

import "lathe/projections"

// withStore wires every reader of d to st, as the daemon does.
func withStore(st *projections.Store, d Deps) Deps {
	d.WorkspaceReads, d.SessionReads, d.AttachmentReads, d.TurnReads = st, st, st, st
	d.TaskReads, d.AutomationReads, d.ChatReads, d.SharedFileReads = st, st, st, st
	d.ApprovalReads, d.WaysReads, d.EventReads, d.FrameReads = st, st, st, st
	return d
}
