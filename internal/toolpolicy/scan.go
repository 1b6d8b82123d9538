package toolpolicy

// AddLabels brings labels into the session as if the result of the call at
// step had carried them: what the gateway found in a result (a credential
// labels it secret), beside the labels the profile gives the tool. A label
// the session carries already keeps the call that first brought it in.
func (s *Session) AddLabels(step int, c Call, labels []string) {
	for _, l := range labels {
		if _, ok := s.labels[l]; !ok && l != "" {
			s.labels[l] = origin{step: step, call: describe(c)}
		}
	}
}
