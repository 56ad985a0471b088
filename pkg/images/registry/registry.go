// Package registry fetches images from OCI registries for pkg/images, which
// links no HTTP itself (its Store takes a Fetcher): give Fetch to a Store
// (Store.Registry) to let it pull registry references.
//
// Credentials come from the usual Docker config (~/.docker/config.json,
// DOCKER_CONFIG); loopback registries (127.0.0.1:PORT, localhost:PORT)
// are reached over plain HTTP (images.ParseRef marks them so).
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/sandbox-run/sandbox-run/pkg/images"
)

// Fetch returns the image ref names in its registry, resolved to
// images.Platform where the registry holds an index. A registry that says
// it has no such name, tag or digest gives an error wrapping
// images.ErrUnknown.
func Fetch(ctx context.Context, ref name.Reference) (v1.Image, error) {
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(images.Platform),
		remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, unknown(err)
	}
	return img, nil
}

// unknown marks err as images.ErrUnknown when the registry said the image
// does not exist.
func unknown(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %v", images.ErrUnknown, err)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return fmt.Errorf("%w: %v", images.ErrUnknown, err)
			}
		}
	}
	return err
}
