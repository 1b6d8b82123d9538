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

// Carry starts s where prev left what no new session may undo: the labels
// prev carried (the agent still holds what it read) and a stop rule that
// held. Budgets and counts start anew.
func (s *Session) Carry(prev *Session) {
	for l, o := range prev.labels {
		if _, ok := s.labels[l]; !ok {
			s.labels[l] = o
		}
	}
	if prev.tripped != nil && prev.tripped.Action == "stop" && s.tripped == nil {
		cp := *prev.tripped
		s.tripped = &cp
	}
}

// LabelCreated gives the files a write created, named once they exist (c's
// files, resolved after the call), the labels the session carries, as
// Record gave them by path: their labels follow them through a rename.
func (s *Session) LabelCreated(c Call) {
	if len(s.labels) > 0 {
		s.fileLabels().add(c, s.Labels())
	}
}
