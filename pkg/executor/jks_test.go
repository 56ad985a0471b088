package executor

import (
	"bytes"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
)

// keytoolList lists the Java KeyStore in file with the JDK's keytool and
// password, and returns each entry's alias and SHA-256 fingerprint.
func keytoolList(t *testing.T, file, password string) (map[string]string, error) {
	t.Helper()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Skip("no keytool on this host")
	}
	out, err := exec.Command(keytool, "-list", "-keystore", file, "-storetype", "JKS", "-storepass", password).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "Keystore type: JKS") {
		return nil, fmt.Errorf("not read as JKS:\n%s", out)
	}
	entries := map[string]string{}
	re := regexp.MustCompile(`(?m)^(\S+), [^\n]*, trustedCertEntry,\s*\nCertificate fingerprint \(SHA-256\): ([0-9A-F:]+)$`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		entries[m[1]] = m[2]
	}
	return entries, nil
}

// fingerprint is der's SHA-256 as keytool prints it.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	hex := make([]string, len(sum))
	for i, b := range sum {
		hex[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(hex, ":")
}

func derOf(t *testing.T, pemData []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

// TestEncodeJKS: the JDK's keytool reads the store with its password,
// every entry a trusted certificate by its alias, and refuses it with
// another password (the integrity digest).
func TestEncodeJKS(t *testing.T) {
	var certs []jksCert
	for _, alias := range []string{"sandbox-run-egress-ca", "second"} {
		ca, err := carry.NewCA(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, jksCert{alias: alias, der: derOf(t, ca.CertPEM())})
	}
	file := filepath.Join(t.TempDir(), "cacerts")
	if err := os.WriteFile(file, encodeJKS(certs, jksPassword, time.Now()), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := keytoolList(t, file, jksPassword)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(certs) {
		t.Errorf("keytool lists %v, want %d entries", entries, len(certs))
	}
	for _, c := range certs {
		if got, want := entries[c.alias], fingerprint(c.der); got != want {
			t.Errorf("%s: fingerprint %q, want %q", c.alias, got, want)
		}
	}
	if _, err := keytoolList(t, file, "another"); err == nil || !strings.Contains(err.Error(), "password was incorrect") {
		t.Errorf("keytool read the store with another password: %v", err)
	}
	// An empty store is a store too.
	if b := encodeJKS(nil, jksPassword, time.Now()); len(b) != 12+20 || !bytes.HasPrefix(b, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2, 0, 0, 0, 0}) {
		t.Errorf("empty store % x", b)
	}
}

// TestAppendJavaUTF: modified UTF-8, as Java's DataOutput.writeUTF.
func TestAppendJavaUTF(t *testing.T) {
	for s, want := range map[string][]byte{
		"X.509":  {0, 5, 'X', '.', '5', '0', '9'},
		"":       {0, 0},
		"a\x00é": {0, 5, 'a', 0xc0, 0x80, 0xc3, 0xa9},
		"€":      {0, 3, 0xe2, 0x82, 0xac},
		"😀":      {0, 6, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80}, // U+D83D U+DE00
	} {
		if got := appendJavaUTF(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: % x, want % x", s, got, want)
		}
	}
	if got := appendJavaUTF(nil, strings.Repeat("é", 40000)); len(got) != 2+65534 || got[0] != 0xff || got[1] != 0xfe {
		t.Errorf("a long string: %d bytes, length % x", len(got), got[:2])
	}
}

// TestCAMountsJava: a sandbox with secrets gets Java's KeyStore at
// /etc/ssl/certs/java/cacerts, the egress's CA in it with the host's roots.
func TestCAMountsJava(t *testing.T) {
	ss, err := NewSecretSession([]string{"TOKEN"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mounts, err := ss.CAMounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 || mounts[0].Target != "/etc/ssl/certs" {
		t.Fatalf("mounts %+v", mounts)
	}
	ca, err := carry.ParseCA(ss.CA)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := keytoolList(t, filepath.Join(mounts[0].Source, "java", "cacerts"), jksPassword)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entries["sandbox-run-egress-ca"], fingerprint(derOf(t, ca.CertPEM())); got != want {
		t.Errorf("the egress CA's fingerprint %q, want %q", got, want)
	}
	host, _ := os.ReadFile(hostBundle)
	if n := bytes.Count(host, []byte("-----BEGIN CERTIFICATE-----")); len(entries) != n+1 {
		t.Errorf("%d entries, want the CA and the host's %d roots", len(entries), n)
	}
}
