package executor

import (
	"crypto/sha1"
	"encoding/binary"
	"time"
	"unicode/utf16"
)

// jksPassword is the password a Java KeyStore of trusted certificates is
// checked with: Java's default for its cacerts.
const jksPassword = "changeit"

// jksCert is a trusted certificate entry of a Java KeyStore: its alias
// (lower case: Java lowers a JKS file's aliases as it reads them) and its
// DER.
type jksCert struct {
	alias string
	der   []byte
}

// encodeJKS encodes certs as a Java KeyStore in the classic format (JKS,
// version 2) of trusted certificate entries made at created, and sealed
// with the integrity digest of password: what Debian's JDKs read at
// /etc/ssl/certs/java/cacerts.
func encodeJKS(certs []jksCert, password string, created time.Time) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0xFEEDFEED) // magic
	b = binary.BigEndian.AppendUint32(b, 2)             // version
	b = binary.BigEndian.AppendUint32(b, uint32(len(certs)))
	for _, c := range certs {
		b = binary.BigEndian.AppendUint32(b, 2) // a trusted certificate
		b = appendJavaUTF(b, c.alias)
		b = binary.BigEndian.AppendUint64(b, uint64(created.UnixMilli()))
		b = appendJavaUTF(b, "X.509")
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.der)))
		b = append(b, c.der...)
	}
	// The digest is SHA-1 over the password's UTF-16 code units, big
	// endian, the words "Mighty Aphrodite" and the store itself.
	h := sha1.New()
	for _, u := range utf16.Encode([]rune(password)) {
		h.Write([]byte{byte(u >> 8), byte(u)})
	}
	h.Write([]byte("Mighty Aphrodite"))
	h.Write(b)
	return h.Sum(b)
}

// appendJavaUTF appends s as Java's DataOutput.writeUTF does: its length
// in bytes (at most 65535; s is cut short past it) and its UTF-16 code
// units in modified UTF-8 (NUL in two bytes, each surrogate in three).
func appendJavaUTF(b []byte, s string) []byte {
	var enc []byte
	for _, u := range utf16.Encode([]rune(s)) {
		var c []byte
		switch {
		case u >= 1 && u <= 0x7f:
			c = []byte{byte(u)}
		case u <= 0x7ff:
			c = []byte{0xc0 | byte(u>>6), 0x80 | byte(u&0x3f)}
		default:
			c = []byte{0xe0 | byte(u>>12), 0x80 | byte(u>>6&0x3f), 0x80 | byte(u&0x3f)}
		}
		if len(enc)+len(c) > 0xffff {
			break
		}
		enc = append(enc, c...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(enc)))
	return append(b, enc...)
}
