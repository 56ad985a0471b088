package images

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Platform is the platform images are resolved to: the host's.
var Platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Fetcher fetches an image from its registry, resolved to Platform where
// the registry holds an index; an image the registry does not have is an
// error wrapping ErrUnknown. pkg/images/registry has the one to use.
type Fetcher func(ctx context.Context, ref name.Reference) (v1.Image, error)

// errNoRegistry says a store was opened without a Fetcher.
var errNoRegistry = errors.New("this image store reaches no registry")

// open returns the image r names, resolved to Platform where the source
// holds an index: registries through s.Registry.
func (s *Store) open(ctx context.Context, r Ref) (v1.Image, error) {
	switch r.Kind {
	case Layout:
		return openLayout(r)
	case Archive:
		var tag *name.Tag
		if r.Tag != "" {
			t, err := name.NewTag(r.Tag)
			if err != nil {
				return nil, err
			}
			tag = &t
		}
		return tarball.ImageFromPath(r.Path, tag)
	}
	if s.Registry == nil {
		return nil, errNoRegistry
	}
	return s.Registry(ctx, r.Name)
}

// errNoTag says a layout has no image by the tag asked for.
var errNoTag = errors.New("the layout has no image tagged")

// openLayout finds the image of r in an OCI layout: the one whose ref
// name is r.Tag, or the only one when r has no tag.
func openLayout(r Ref) (v1.Image, error) {
	p, err := layout.FromPath(r.Path)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		if r.Tag == "" || d.Annotations[refNameAnnotation] == r.Tag {
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0 && r.Tag != "":
		return nil, fmt.Errorf("%w %q", errNoTag, r.Tag)
	case len(found) == 0:
		return nil, errors.New("the layout holds no image")
	case len(found) > 1:
		return nil, fmt.Errorf("the layout holds %d images: name one with oci:%s:TAG", len(found), r.Path)
	}
	return resolve(idx, found[0])
}

// resolve returns the image of descriptor d of idx, following nested
// indexes to the one for Platform.
func resolve(idx v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	for depth := 0; ; depth++ {
		if !d.MediaType.IsIndex() {
			return idx.Image(d.Digest)
		}
		if depth > 4 {
			return nil, errors.New("indexes nested too deep")
		}
		inner, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := inner.IndexManifest()
		if err != nil {
			return nil, err
		}
		var pick *v1.Descriptor
		for i := range m.Manifests {
			if p := m.Manifests[i].Platform; p != nil && p.Satisfies(Platform) {
				pick = &m.Manifests[i]
				break
			}
		}
		if pick == nil {
			return nil, fmt.Errorf("no image for %s in the index", Platform)
		}
		idx, d = inner, *pick
	}
}
