// Package images keeps OCI images on the host for sandboxes to use as
// their root filesystems: it parses references as users write them
// (registry references, oci:PATH[:TAG] layouts, docker-archive:PATH
// tarballs), fetches images into a content-addressed store where every
// blob is verified against its digest and shared by every image that has
// it, and lists, removes and prunes them; past a bound (Caps.StoreBytes)
// it evicts the least recently used images no run is using (evict.go).
// It uses go-containerregistry and never shells out to docker or skopeo.
//
// Issue 15 builds on it: unpacking layers (pkg/images/layer), composing an
// image's root, and running in it.
package images
