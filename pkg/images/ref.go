package images

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Kind says where an image comes from.
type Kind int

const (
	// Registry is an image in a registry: python:3.12-slim,
	// ghcr.io/org/img:tag, name@sha256:..., 127.0.0.1:5000/img.
	Registry Kind = iota
	// Layout is an OCI image layout directory: oci:/path[:tag].
	Layout
	// Archive is a `docker save` tarball: docker-archive:/path.tar[:name:tag].
	Archive
)

func (k Kind) String() string {
	return [...]string{"registry", "oci", "docker-archive"}[k]
}

// Ref is an image reference as a user writes it, parsed.
type Ref struct {
	Kind Kind
	// Registry: the reference, defaults filled in (docker.io/library/...,
	// :latest).
	Name name.Reference
	// Layout and Archive: the path on the host, and the tag to pick
	// ("" when the source holds one image).
	Path, Tag string
}

// String is the reference in its canonical form: the key under which the
// store knows the image.
func (r Ref) String() string {
	switch r.Kind {
	case Layout, Archive:
		s := r.Kind.String() + ":" + r.Path
		if r.Tag != "" {
			s += ":" + r.Tag
		}
		return s
	}
	return r.Name.Name()
}

// ErrRef is wrapped by every error of ParseRef.
var ErrRef = errors.New("invalid image reference")

// ParseRef parses an image reference: a registry reference as docker
// takes it, or a local source in skopeo's transport syntax, oci:PATH[:TAG]
// (an OCI image layout) or docker-archive:PATH[:NAME:TAG] (a docker save
// tarball). Local paths must be absolute.
func ParseRef(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%w %q: %s", ErrRef, s, why)
	}
	if strings.TrimSpace(s) != s || s == "" {
		return bad("empty, or spaces around it")
	}
	if strings.ContainsAny(s, "\x00\n\r\t") {
		return bad("control characters")
	}
	for _, t := range []struct {
		prefix string
		kind   Kind
	}{{"oci:", Layout}, {"docker-archive:", Archive}} {
		rest, ok := strings.CutPrefix(s, t.prefix)
		if !ok {
			continue
		}
		path, tag, _ := strings.Cut(rest, ":")
		if path == "" || !filepath.IsAbs(path) {
			return bad("the path of a local image must be absolute")
		}
		if filepath.Clean(path) != path {
			return bad("the path is not clean")
		}
		if tag != "" {
			if t.kind == Archive {
				if _, err := name.NewTag(tag); err != nil {
					return bad("the name in the archive: " + err.Error())
				}
			} else if strings.ContainsAny(tag, "/ ") {
				return bad("the tag of a layout image")
			}
		}
		return Ref{Kind: t.kind, Path: path, Tag: tag}, nil
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return bad("no scheme: write host[:port]/name[:tag]")
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return bad(err.Error())
	}
	return Ref{Kind: Registry, Name: ref}, nil
}
