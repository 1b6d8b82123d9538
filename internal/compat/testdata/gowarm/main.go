// Command warm imports the standard packages of the go-module workload (its
// own and those of github.com/google/uuid), so that building it fills a build
// cache the workload starts from.
package main

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

var _ = []any{bytes.Equal, md5.New, rand.Read, sha1.New, driver.IsValue, binary.BigEndian, hex.EncodeToString, errors.New, fmt.Sprint, hash.Hash(nil), io.EOF, net.ParseIP, os.Exit, strings.Cut, sync.Once{}, time.Now}

func main() {}
