package sandbox

import "github.com/cordon-sandbox/cordon/internal/sandbox/wire"

type Request = wire.Request

const ControlFD = wire.ControlFD
