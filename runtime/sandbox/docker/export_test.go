package docker

// SpareReady reports whether a relay waits for s's next Dial.
func SpareReady(s *Sandbox) bool {
	s.relays.mu.Lock()
	defer s.relays.mu.Unlock()
	return s.relays.spare != nil
}
