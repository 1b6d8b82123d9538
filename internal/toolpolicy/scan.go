package toolpolicy

// AddLabels brings labels into the session as if the result of the call at
// step had carried them: what the gateway found in a result (a credential
// labels it secret), beside the labels the profile gives the tool. A label
// the session carries already keeps the call that first brought it in.
func (s *Session) AddLabels(step int, c Call, labels []string) {
	o := originOf(step, c)
	for _, l := range labels {
		if l != "" {
			s.labels.add(l, o)
		}
	}
}

// originOf is the origin of labels brought in by the call at step,
// described once, when first needed.
func originOf(step int, c Call) func() origin {
	var desc string
	return func() origin {
		if desc == "" {
			desc = describe(c)
		}
		return origin{step: step, call: desc}
	}
}

// Carry starts s where prev left what no new session may undo: the labels
// prev carried (the agent still holds what it read) and a stop rule that
// held. Budgets and counts start anew.
func (s *Session) Carry(prev *Session) {
	for _, l := range prev.labels {
		s.labels.add(l.name, func() origin { return l.origin })
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

// SpillLabels gives every file the labels the session carries (see
// FileLabels.Spill).
func (s *Session) SpillLabels() {
	if len(s.labels) > 0 {
		s.fileLabels().Spill(s.Labels())
	}
}
