package image

import (
	"errors"
	"fmt"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/pkg/cli"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/signature/sigstore"
)

// Signing says how Append signs the image it writes, with skopeo's copy
// flags. The signature is stored where the destination keeps signatures:
// for docker:// that is the registries.d lookaside, or sigstore
// attachments in the registry when registries.d enables them
// (use-sigstore-attachments: true, containers-registries.d(5)).
type Signing struct {
	// SigstorePrivateKey is a sigstore (cosign) private key file
	// (--sign-by-sigstore-private-key).
	SigstorePrivateKey string
	// PassphraseFile's first line is the passphrase of the key
	// (--sign-passphrase-file); none means an empty passphrase.
	PassphraseFile string
	// By is a GPG key for simple signing (--sign-by). Builds with the
	// containers_image_openpgp tag, mcbake's own, cannot sign with GPG:
	// containers/image refuses with a SigningNotSupportedError.
	By string
}

// Check refuses, before anything is read or written, signing options that
// can never work: a passphrase file with no key, one passphrase for two
// keys, an unreadable passphrase file, a sigstore key that does not load
// with the passphrase, and GPG signing in a build without it (mcbake's,
// with the containers_image_openpgp tag).
func (s Signing) Check() error {
	if s == (Signing{}) {
		return nil
	}
	if err := s.apply(&copy.Options{}); err != nil {
		return err
	}
	pass, err := cli.ReadPassphraseFile(s.PassphraseFile)
	if err != nil {
		return fmt.Errorf("signing passphrase: %w", err)
	}
	if s.SigstorePrivateKey != "" {
		sg, err := sigstore.NewSigner(sigstore.WithPrivateKeyFile(s.SigstorePrivateKey, []byte(pass)))
		if err != nil {
			return fmt.Errorf("--sign-by-sigstore-private-key %s: %w", s.SigstorePrivateKey, err)
		}
		_ = sg.Close()
	}
	if s.By != "" {
		mech, err := signature.NewGPGSigningMechanism()
		if err != nil {
			return fmt.Errorf("--sign-by %s: %w", s.By, err)
		}
		defer mech.Close()
		if err := mech.SupportsSigning(); err != nil {
			return fmt.Errorf("--sign-by %s: %w (sign with --sign-by-sigstore-private-key)", s.By, err)
		}
	}
	return nil
}

// apply adds the signing options to co.
func (s Signing) apply(co *copy.Options) error {
	if s.SigstorePrivateKey == "" && s.By == "" {
		if s.PassphraseFile != "" {
			return errors.New("a passphrase file needs a key to sign with (--sign-by-sigstore-private-key or --sign-by)")
		}
		return nil
	}
	if s.SigstorePrivateKey != "" && s.By != "" && s.PassphraseFile != "" {
		return errors.New("one passphrase file cannot unlock both a sigstore and a GPG key")
	}
	pass, err := cli.ReadPassphraseFile(s.PassphraseFile)
	if err != nil {
		return fmt.Errorf("signing passphrase: %w", err)
	}
	if s.SigstorePrivateKey != "" {
		co.SignBySigstorePrivateKeyFile = s.SigstorePrivateKey
		co.SignSigstorePrivateKeyPassphrase = []byte(pass)
	}
	if s.By != "" {
		co.SignBy, co.SignPassphrase = s.By, pass
	}
	return nil
}
