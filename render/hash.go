package render

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
)

func hashHex(algo string, data []byte) (string, error) {
	switch algo {
	case "sha256":
		s := sha256.Sum256(data)
		return hex.EncodeToString(s[:]), nil
	case "sha512":
		s := sha512.Sum512(data)
		return hex.EncodeToString(s[:]), nil
	}
	return "", fmt.Errorf("verification hash type %q: want sha256 or sha512", algo)
}
