package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

// TestAnswer exercises the DNS server's answers without a netstack.
func TestAnswer(t *testing.T) {
	lookups := 0
	e := &Egress{
		cfg: Config{
			Policy: mustPolicy(t, "pub.test", "mixed.test:443", "v6only.test", "doc6.test", "loop6.test", "ula.test", "many.test", "broken.test", "gone.test", "*.wild.test", "host.sandbox.internal:8000", "10.9.0.0/16", "::1", "[fd00:9::/32]:443"),
			Resolver: func(_ context.Context, host string) ([]netip.Addr, error) {
				lookups++
				var s []string
				switch host {
				case "pub.test":
					s = []string{"172.32.0.1", "::ffff:172.32.0.2"}
				case "mixed.test":
					s = []string{"10.1.1.1", "172.32.0.3", "127.0.0.1", "10.9.1.1", "2001:db8::1"}
				case "v6only.test":
					s = []string{"3ffe::1", "3ffe::2"} // the retired 6bone's: public to netpolicy, routed nowhere
				case "doc6.test":
					s = []string{"2001:db8::1"}
				case "loop6.test":
					s = []string{"::1", "127.0.0.1"}
				case "ula.test":
					s = []string{"fd00:9::5", "fd00:8::5"}
				case "many.test":
					for i := 1; i <= 20; i++ {
						s = append(s, netip.AddrFrom4([4]byte{172, 32, 0, byte(i)}).String())
					}
				case "a.wild.test":
					s = []string{"172.32.9.50"}
				case "broken.test":
					return nil, errors.New("resolver on fire")
				default:
					return nil, fakeNotFound(host)
				}
				var out []netip.Addr
				for _, a := range s {
					out = append(out, netip.MustParseAddr(a))
				}
				return out, nil
			},
		},
		names: map[netip.Addr][]string{},
		cache: map[string]cached{},
		dests: map[destKey]*destStat{},
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer e.cancel()
	e.pol.Store(&e.cfg.Policy)
	e.checker = checker{policy: e.policy, host: netpolicy.NewAddrSet(netip.MustParseAddr("172.32.9.50"))}

	for _, tc := range []struct {
		name  string
		typ   dnsmessage.Type
		class dnsmessage.Class
		rcode dnsmessage.RCode
		addrs string
	}{
		{"pub.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, "172.32.0.1,172.32.0.2"},
		{"PUB.Test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, "172.32.0.1,172.32.0.2"},
		{"pub.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, ""}, // ::ffff:172.32.0.2 is IPv4
		{"pub.test.", dnsmessage.TypeMX, 0, dnsmessage.RCodeSuccess, ""},
		{"pub.test.", dnsmessage.TypeA, dnsmessage.ClassCHAOS, dnsmessage.RCodeNameError, ""},
		{"mixed.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, "172.32.0.3,10.9.1.1"},
		{"mixed.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, ""}, // 2001:db8::1 withheld
		{"v6only.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, ""},
		{"v6only.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, "3ffe::1,3ffe::2"},
		{"doc6.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeNameError, ""},
		{"doc6.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeNameError, ""},
		{"loop6.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, "::1"}, // the entry ::1 names it
		{"loop6.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, ""},       // 127.0.0.1 withheld
		{"ula.test.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, "fd00:9::5"},
		{"many.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, "172.32.0.1,172.32.0.2,172.32.0.3,172.32.0.4,172.32.0.5,172.32.0.6,172.32.0.7,172.32.0.8"},
		{"a.wild.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeNameError, ""}, // the host's own address
		{"broken.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeServerFailure, ""},
		{"gone.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeNameError, ""},
		{"other.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeNameError, ""},
		{"wild.test.", dnsmessage.TypeA, 0, dnsmessage.RCodeNameError, ""},
		{"host.sandbox.internal.", dnsmessage.TypeA, 0, dnsmessage.RCodeSuccess, HostInternalAddr},
		{"host.sandbox.internal.", dnsmessage.TypeAAAA, 0, dnsmessage.RCodeSuccess, ""},
		{"1.0.0.127.in-addr.arpa.", dnsmessage.TypePTR, 0, dnsmessage.RCodeNameError, ""},
	} {
		class := tc.class
		if class == 0 {
			class = dnsmessage.ClassINET
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 42, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(tc.name), Type: tc.typ, Class: class})
		q, _ := b.Finish()
		var m dnsmessage.Message
		if err := m.Unpack(e.answer(q)); err != nil {
			t.Errorf("%s %v: %v", tc.name, tc.typ, err)
			continue
		}
		var got []string
		for _, a := range m.Answers {
			switch r := a.Body.(type) {
			case *dnsmessage.AResource:
				got = append(got, netip.AddrFrom4(r.A).String())
			case *dnsmessage.AAAAResource:
				got = append(got, netip.AddrFrom16(r.AAAA).String())
			}
		}
		if m.ID != 42 || !m.Response || m.RCode != tc.rcode || strings.Join(got, ",") != tc.addrs || len(m.Questions) != 1 {
			t.Errorf("%s %v: %v %v, want %v %q", tc.name, tc.typ, m.RCode, got, tc.rcode, tc.addrs)
		}
	}
	// Cached: looking pub.test up again does not ask the resolver.
	before := lookups
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("pub.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	e.answer(q)
	if lookups != before {
		t.Error("a second lookup was not cached")
	}
	// The addresses handed out are remembered for their name; the ones
	// withheld are not.
	if got := e.names[netip.MustParseAddr("172.32.0.3")]; strings.Join(got, ",") != "mixed.test,many.test" {
		t.Errorf("names of 172.32.0.3: %q", got)
	}
	if got := e.names[netip.MustParseAddr("3ffe::2")]; strings.Join(got, ",") != "v6only.test" {
		t.Errorf("names of 3ffe::2: %q", got)
	}
	// An intercepted connection to it goes to the name (pkg/intercept).
	if to := e.target(decision{}, netip.MustParseAddr("3ffe::2"), 443); strings.Join(to.Names, ",") != "v6only.test" {
		t.Errorf("the target of [3ffe::2]:443: %+v", to)
	}
	for _, a := range []string{"10.1.1.1", "127.0.0.1", "172.32.9.50", "2001:db8::1", "fd00:8::5"} {
		if _, ok := e.names[netip.MustParseAddr(a)]; ok {
			t.Errorf("%s was handed out", a)
		}
	}
	// A name's port applies to its addresses; the CIDR entry re-allows
	// its private address on any port, the name alone does not.
	for _, tc := range []struct {
		addr string
		port uint16
		ok   bool
	}{
		{"172.32.0.3", 443, true},
		{"172.32.0.3", 80, true}, // many.test allows every port
		{"172.32.0.1", 80, true},
		{"172.32.0.200", 80, false},
		{"10.9.1.1", 22, true},
		{"10.1.1.1", 443, false},
		{HostInternalAddr, 8000, true},
		{HostInternalAddr, 8001, false},
		{GatewayAddr, 80, false},
		{GatewayAddr6, 80, false},
		{"3ffe::1", 22, true},          // v6only.test, every port
		{"3ffe::3", 22, false},         // no name, no entry
		{"::1", 22, true},              // the entry ::1
		{"fd00:9::5", 443, true},       // the CIDR entry, its port
		{"fd00:9::5", 80, false},       // another port
		{"fd00:8::5", 443, false},      // private: no entry names it
		{"fe80::1", 443, false},        // link-local
		{"2001:db8::1", 443, false},    // documentation, and mixed.test's only by a withheld answer
		{"64:ff9b::7f00:1", 22, false}, // NAT64 embedding 127.0.0.1
	} {
		d := e.decide(netip.MustParseAddr(tc.addr), tc.port)
		if (d.reason == "") != tc.ok {
			t.Errorf("decide(%s:%d) = %+v", tc.addr, tc.port, d)
		}
	}
	// Garbage and responses get no answer.
	if e.answer([]byte{1, 2, 3}) != nil {
		t.Error("garbage got an answer")
	}
	resp := e.answer(q)
	if e.answer(resp) != nil {
		t.Error("a response got an answer")
	}
	s := e.Stats()
	if d, ok := findDest(s, "dns", "a.wild.test", 0, false); !ok || !strings.Contains(d.Reason, "this host's own address") {
		t.Errorf("a.wild.test: %+v", d)
	}
	if d, ok := findDest(s, "dns", "broken.test", 0, true); !ok || !strings.Contains(d.Error, "on fire") {
		t.Errorf("broken.test: %+v", d)
	}
}

// FuzzAnswer: no query makes the DNS server panic, and every answer is a
// well-formed response to it.
func FuzzAnswer(f *testing.F) {
	for _, name := range []string{"pub.test.", "no.test.", "host.sandbox.internal."} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		f.Add(q)
	}
	e := &Egress{
		cfg: Config{
			Policy: mustPolicy(f, "pub.test", "host.sandbox.internal:1"),
			Resolver: func(context.Context, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("172.32.0.1")}, nil
			},
		},
		names: map[netip.Addr][]string{},
		cache: map[string]cached{},
		dests: map[destKey]*destStat{},
	}
	e.pol.Store(&e.cfg.Policy)
	e.checker = checker{policy: e.policy}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	f.Fuzz(func(t *testing.T, q []byte) {
		resp := e.answer(q)
		if resp == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil || !m.Response {
			t.Fatalf("answer to %x: %x: %v", q, resp, err)
		}
	})
}
