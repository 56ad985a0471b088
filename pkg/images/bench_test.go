package images

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// The pull and unpack throughput of a ~50 MB image (a 45 MB base layer
// and a 5 MB one, random data: gzip cannot shrink it) from a registry on
// 127.0.0.1, into an empty store; and the pull of a second image that
// shares the base layer into a store that has the first, which fetches
// only its own layer (fetched-MB/op). docs/BENCHMARKS.md has the numbers:
//
//	go test -run '^$' -bench 'Pull' -benchtime 5x ./pkg/images
func BenchmarkPullUnpack(b *testing.B) {
	reg := imagetest.NewRegistry(b)
	base, err := random.Layer(45<<20, types.OCILayer)
	if err != nil {
		b.Fatal(err)
	}
	top, err := random.Layer(5<<20, types.OCILayer)
	if err != nil {
		b.Fatal(err)
	}
	img := imagetest.Image(b, []string{"PATH=/bin"}, base, top)
	ref := reg.Push(b, img, "bench/fifty:1")
	m, err := img.Manifest()
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, l := range m.Layers {
		size += l.Size
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := openStoreAt(b, b.TempDir())
		b.StartTimer()
		if _, err := s.Fetch(context.Background(), ref, Caps{}, layer.Limits{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPullSharedBase(b *testing.B) {
	reg := imagetest.NewRegistry(b)
	base, err := random.Layer(45<<20, types.OCILayer)
	if err != nil {
		b.Fatal(err)
	}
	first := reg.Push(b, imagetest.Image(b, []string{"PATH=/bin"}, base), "bench/base:1")
	var fetched int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := openStoreAt(b, b.TempDir())
		if _, err := s.Fetch(context.Background(), first, Caps{}, layer.Limits{}, nil); err != nil {
			b.Fatal(err)
		}
		top, err := random.Layer(5<<20, types.OCILayer)
		if err != nil {
			b.Fatal(err)
		}
		img, err := mutate.AppendLayers(imagetest.Image(b, []string{"PATH=/bin"}, base), top)
		if err != nil {
			b.Fatal(err)
		}
		second := reg.Push(b, img, "bench/second:1")
		baseDigest, _ := base.Digest()
		topDigest, _ := top.Digest()
		topSize, _ := top.Size()
		before := reg.BlobGets(baseDigest.String())
		b.StartTimer()
		if _, err := s.Fetch(context.Background(), second, Caps{}, layer.Limits{}, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if reg.BlobGets(baseDigest.String()) != before || reg.BlobGets(topDigest.String()) != 1 {
			b.Fatalf("the second pull fetched the shared base layer %d times and its own %d times, want 0 and 1",
				reg.BlobGets(baseDigest.String())-before, reg.BlobGets(topDigest.String()))
		}
		fetched += topSize
		b.StartTimer()
	}
	b.ReportMetric(float64(fetched)/float64(b.N)/(1<<20), "fetched-MB/op")
}
