package probe

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CanaryEnvName is the variable the host side sets in cordon's own
// environment; the sandbox must never see its value.
const CanaryEnvName = "CORDON_PROBE_CANARY"

// Plant sets up the targets outside the sandbox: a world-readable canary
// file in a new directory of dir, a canary value in cordon's environment,
// and a loopback service that answers "cordon-canary". The returned
// function removes them.
func Plant(dir string) (*Targets, func(), error) {
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
	os.Chmod(d, 0o755)
	file := filepath.Join(d, "canary-secret")
	if err := os.WriteFile(file, []byte("cordon-canary "+value+"\n"), 0o644); err != nil {
		os.RemoveAll(d)
		return nil, nil, fmt.Errorf("canary file: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(d)
		return nil, nil, fmt.Errorf("canary service: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("cordon-canary\n"))
			c.Close()
		}
	}()
	abstract := "@cordon-probe-" + value[:12]
	al, err := net.Listen("unix", abstract)
	if err != nil {
		ln.Close()
		os.RemoveAll(d)
		return nil, nil, fmt.Errorf("canary abstract socket: %w", err)
	}
	go func() {
		for {
			c, err := al.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("cordon-canary\n"))
			c.Close()
		}
	}()
	key := int(sum[0])<<16 | int(sum[1])<<8 | int(sum[2]) | 0x5c000000
	shm, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o644)
	if err != nil {
		al.Close()
		ln.Close()
		os.RemoveAll(d)
		return nil, nil, fmt.Errorf("canary shared memory: %w", err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		unix.SysvShmCtl(shm, unix.IPC_RMID, nil)
		al.Close()
		ln.Close()
		os.RemoveAll(d)
		return nil, nil, fmt.Errorf("canary UDP service: %w", err)
	}
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
	t := &Targets{CanaryFile: file, CanaryEnv: CanaryEnvName, CanaryEnvSHA256: hex.EncodeToString(sum[:]), LoopbackAddr: ln.Addr().String(),
		AbstractSocket: abstract, SysVKey: key, HostHostname: host, UDPAddr: udp.LocalAddr().String()}
	return t, func() {
		udp.Close()
		unix.SysvShmCtl(shm, unix.IPC_RMID, nil)
		al.Close()
		ln.Close()
		os.RemoveAll(d)
		if had {
			os.Setenv(CanaryEnvName, prev)
		} else {
			os.Unsetenv(CanaryEnvName)
		}
	}, nil
}
