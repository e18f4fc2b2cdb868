package docker

// CloseRelay ends s's relay session: the next Dial starts another.
func CloseRelay(s *Sandbox) { s.closeRelay() }
