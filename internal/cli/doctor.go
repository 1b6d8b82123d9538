package cli

// doctorCmd is filled in below.
func doctorCmd(e *env, args []string) int { return 0 }
