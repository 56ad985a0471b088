package wire

import "time"

// SecretPut is the body of PUT /api/sandbox/secrets/{name}: the secret's
// value, the hosts it may be sent to ("api.example.com", "*.example.com",
// optionally with ":PORT"), and optionally a header it is also sent in.
type SecretPut struct {
	Value  string        `json:"value"`
	Hosts  []string      `json:"hosts"`
	Header *SecretHeader `json:"header,omitempty"`
}

// SecretHeader presents a secret as a request header: Name set to Format
// with "{value}" replaced ("Bearer {value}"; none: the value alone).
type SecretHeader struct {
	Name   string `json:"name"`
	Format string `json:"format,omitempty"`
}

// Secret is a stored secret as listed: never its value.
type Secret struct {
	Name    string        `json:"name"`
	Hosts   []string      `json:"hosts"`
	Header  *SecretHeader `json:"header,omitempty"`
	Created time.Time     `json:"created"`
	Updated time.Time     `json:"updated"`
}

// SecretList is the answer of GET /api/sandbox/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}
