package docker

// CloseLink ends s's helper session: the next Dial starts another.
func CloseLink(s *Sandbox) { s.closeLink() }
