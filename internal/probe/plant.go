package probe

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// CanaryEnvName is the variable the host side sets in cordon's own
// environment; the sandbox must never see its value.
const CanaryEnvName = "CORDON_PROBE_CANARY"

// Plant sets up the targets outside the sandbox: a world-readable canary
// file in a new directory of dir, a canary value in cordon's environment,
// and a loopback service that answers "cordon-canary". The returned
// function removes them.
func Plant(dir string) (t *Targets, cleanup func(), err error) {
	// undo runs in reverse what has been set up, on failure or at cleanup.
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()

	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, nil, err
	}
	value := hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(value))

	d, err := os.MkdirTemp(dir, "cordon-probe-")
	if err != nil {
		return nil, nil, fmt.Errorf("canary directory: %w", err)
	}
	undo = append(undo, func() { os.RemoveAll(d) })
	os.Chmod(d, 0o755)
	file := filepath.Join(d, "canary-secret")
	if err := os.WriteFile(file, []byte("cordon-canary "+value+"\n"), 0o644); err != nil {
		return nil, nil, fmt.Errorf("canary file: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("canary service: %w", err)
	}
	undo = append(undo, func() { ln.Close() })
	go answer(ln)
	allowed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("allowed service: %w", err)
	}
	undo = append(undo, func() { allowed.Close() })
	go answerAfterRead(allowed)
	abstract := "@cordon-probe-" + value[:12]
	al, err := net.Listen("unix", abstract)
	if err != nil {
		return nil, nil, fmt.Errorf("canary abstract socket: %w", err)
	}
	undo = append(undo, func() { al.Close() })
	go answer(al)
	key := int(sum[0])<<16 | int(sum[1])<<8 | int(sum[2]) | 0x5c000000
	shm, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("canary shared memory: %w", err)
	}
	undo = append(undo, func() { unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("canary UDP service: %w", err)
	}
	undo = append(undo, func() { udp.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			udp.WriteTo([]byte("cordon-canary\n"), from)
		}
	}()
	host, _ := os.Hostname()
	prev, had := os.LookupEnv(CanaryEnvName)
	os.Setenv(CanaryEnvName, value)
	undo = append(undo, func() {
		if had {
			os.Setenv(CanaryEnvName, prev)
		} else {
			os.Unsetenv(CanaryEnvName)
		}
	})
	t = &Targets{CanaryFile: file, CanaryEnv: CanaryEnvName, CanaryEnvSHA256: hex.EncodeToString(sum[:]), LoopbackAddr: ln.Addr().String(),
		AbstractSocket: abstract, SysVKey: key, HostHostname: host, UDPAddr: udp.LocalAddr().String(), AllowedAddr: allowed.Addr().String()}
	return t, cleanup, nil
}

// answer greets every connection to ln with "cordon-canary" until ln closes.
func answer(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("cordon-canary\n"))
		c.Close()
	}
}

// answerAfterRead answers "cordon-canary" to whatever a connection to ln
// sends first, until ln closes.
func answerAfterRead(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 4096)); err == nil {
				c.Write([]byte("cordon-canary\n"))
			}
		}()
	}
}
