package registry

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/images"
)

// Fetch gets an image a registry on 127.0.0.1 has; a name or tag it lacks
// is images.ErrUnknown, a registry that cannot be reached is not.
func TestFetch(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	img := imagetest.Image(t, []string{"PATH=/bin"}, imagetest.Layer(t, imagetest.File{Name: "marker", Data: []byte("m")}))
	ref := reg.Push(t, img, "fetch/img:1")
	parse := func(s string) name.Reference {
		r, err := images.ParseRef(s)
		if err != nil {
			t.Fatal(err)
		}
		return r.Name
	}
	got, err := Fetch(context.Background(), parse(ref))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d.String() != imagetest.Digest(t, img) {
		t.Errorf("digest %s, want %s", d, imagetest.Digest(t, img))
	}
	for _, missing := range []string{reg.Host + "/fetch/img:2", reg.Host + "/fetch/other:1"} {
		if _, err := Fetch(context.Background(), parse(missing)); !errors.Is(err, images.ErrUnknown) {
			t.Errorf("%s: %v, want ErrUnknown", missing, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if _, err := Fetch(context.Background(), parse(dead+"/fetch/img:1")); err == nil || errors.Is(err, images.ErrUnknown) {
		t.Errorf("an unreachable registry: %v, want an error that is not ErrUnknown", err)
	}
}
