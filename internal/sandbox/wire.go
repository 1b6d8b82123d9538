package sandbox

import "github.com/cordon-sandbox/cordon/internal/sandbox/wire"

// The host side's names for what it and init say to each other (see
// package wire).
type (
	Mount      = wire.Mount
	Layer      = wire.Layer
	Rlimits    = wire.Rlimits
	Status     = wire.Status
	Weakenings = wire.Weakenings
)

const (
	SpecFD     = wire.SpecFD
	StatusFD   = wire.StatusFD
	ConsoleFD  = wire.ConsoleFD
	ProxyFD    = wire.ProxyFD
	LayerFD    = wire.LayerFD
	SelfFD     = wire.SelfFD
	FirstFD    = wire.FirstFD
	LayerUpper = wire.LayerUpper
	LayerWork  = wire.LayerWork
	InitArg    = wire.InitArg
	HoldArg    = wire.HoldArg
	Placed     = wire.Placed

	TagProxy        = wire.TagProxy
	TagTransparent  = wire.TagTransparent
	TagDNS          = wire.TagDNS
	TransparentPort = wire.TransparentPort
	DNSAddr         = wire.DNSAddr
	GitIgnoreFile   = wire.GitIgnoreFile
)
