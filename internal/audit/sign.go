package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Checkpoint is a signature over the chain's head: the sequence number and
// hash of its last record at the time.
type Checkpoint struct {
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

func checkpointMessage(seq int64, hash string) []byte {
	return []byte("cordon audit checkpoint\n" + strconv.FormatInt(seq, 10) + "\n" + hash + "\n")
}

// KeyID names a public key: the first bytes of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

func sign(key ed25519.PrivateKey, seq int64, hash string) *Checkpoint {
	pub := key.Public().(ed25519.PublicKey)
	return &Checkpoint{Seq: seq, Hash: hash, KeyID: KeyID(pub), Signature: hex.EncodeToString(ed25519.Sign(key, checkpointMessage(seq, hash)))}
}

// Verify checks the checkpoint's signature with pub.
func (c *Checkpoint) Verify(pub ed25519.PublicKey) error {
	if c.KeyID != KeyID(pub) {
		return fmt.Errorf("signed by key %s, not by %s", c.KeyID, KeyID(pub))
	}
	sig, err := hex.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, checkpointMessage(c.Seq, c.Hash), sig) {
		return errors.New("the signature does not verify")
	}
	return nil
}

// HeadPath is where the latest checkpoint of the log at path is kept, apart
// from the log, so that a log cut before it shows.
func HeadPath(path string) string { return path + ".head" }

// writeHead replaces the head file atomically.
func writeHead(path string, c *Checkpoint) error {
	b, _ := json.Marshal(c)
	tmp := HeadPath(path) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("audit checkpoint: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = os.Rename(tmp, HeadPath(path))
	}
	if err != nil {
		return fmt.Errorf("audit checkpoint: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// ReadHead reads the latest checkpoint of the log at path; nil when there
// is none.
func ReadHead(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(HeadPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", HeadPath(path), err)
	}
	return &c, nil
}

// GenerateKey writes a new Ed25519 key pair: the private key to path
// (PKCS #8 PEM, 0600), the public key to path.pub.
func GenerateKey(path string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pder, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o644); err != nil {
		return nil, err
	}
	return pub, nil
}

// LoadPrivateKey reads a key GenerateKey wrote.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	k, err := loadPEM(path, "PRIVATE KEY", x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 private key", path)
	}
	return priv, nil
}

// LoadPublicKey reads a public key GenerateKey wrote.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	k, err := loadPEM(path, "PUBLIC KEY", x509.ParsePKIXPublicKey)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 public key", path)
	}
	return pub, nil
}

func loadPEM(path, typ string, parse func([]byte) (any, error)) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("%s: not a PEM %s", path, typ)
	}
	k, err := parse(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
