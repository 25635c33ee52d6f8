package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// Secret is a password kept as its SHA-256 digest, so that comparing a
// candidate takes the same time whatever its bytes and its length. The
// zero value is "no password", which nothing matches. It is immutable,
// safe for concurrent use.
type Secret struct {
	set    bool
	digest [sha256.Size]byte
}

// NewSecret keeps pw; an empty pw is no password.
func NewSecret(pw string) Secret {
	return Secret{set: pw != "", digest: sha256.Sum256([]byte(pw))}
}

// Set reports whether there is a password.
func (s *Secret) Set() bool { return s.set }

// Matches reports, in constant time, whether pass is the password. It is
// false for every pass when there is none.
func (s *Secret) Matches(pass []byte) bool {
	d := sha256.Sum256(pass)
	return subtle.ConstantTimeCompare(d[:], s.digest[:]) == 1 && s.set
}

// MatchesString is Matches for a password already in a string.
func (s *Secret) MatchesString(pass string) bool { return s.Matches([]byte(pass)) }

// BearerToken returns the token of an authorization value "Bearer
// <token>" (the scheme in any case, the token trimmed of spaces), or false
// when v names another scheme or none.
func BearerToken(v string) (string, bool) {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}
