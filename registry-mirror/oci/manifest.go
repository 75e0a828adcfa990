package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandtrail/sandtrail/record/event"
)

// maxManifest bounds a manifest or an index. Real ones are a few KiB; the
// distribution spec lets registries refuse those over 4 MiB.
const maxManifest = 4 << 20

// ErrBadManifest: the bytes (verified against their digest) are not a
// manifest or index of a media type the mirror serves.
var ErrBadManifest = errors.New("oci: not a manifest the mirror serves")

// mediaTypes are the manifest media types the mirror serves, in the order
// it asks the upstream for them.
var mediaTypes = []types.MediaType{types.OCIImageIndex, types.OCIManifestSchema1, types.DockerManifestList, types.DockerManifestSchema2}

// manifest is what the mirror reads of a manifest or an index: its media
// type, and the descriptors it names, with their sizes.
type manifest struct {
	mediaType types.MediaType
	// blobs are a manifest's config and layers; children an index's
	// manifests.
	blobs, children []v1.Descriptor
}

// rawManifest is both an image manifest and an index, as JSON.
type rawManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     types.MediaType `json:"mediaType"`
	Config        *v1.Descriptor  `json:"config"`
	Layers        []v1.Descriptor `json:"layers"`
	Manifests     []v1.Descriptor `json:"manifests"`
}

// parseManifest reads a manifest or an index. Its media type is its
// mediaType field or, when that is absent (OCI makes it optional), what
// its fields say it is. It returns an error wrapping ErrBadManifest for
// anything but schema version 2 of a type in mediaTypes, or a descriptor
// whose digest the mirror could not verify or whose size is negative.
func parseManifest(b []byte) (*manifest, error) {
	var raw rawManifest
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if raw.SchemaVersion != 2 {
		return nil, fmt.Errorf("%w: schema version %d", ErrBadManifest, raw.SchemaVersion)
	}
	m := &manifest{mediaType: raw.MediaType, children: raw.Manifests, blobs: raw.Layers}
	if raw.Config != nil {
		m.blobs = append([]v1.Descriptor{*raw.Config}, m.blobs...)
	}
	if m.mediaType == "" {
		m.mediaType = types.OCIManifestSchema1
		if raw.Manifests != nil {
			m.mediaType = types.OCIImageIndex
		}
	}
	index := m.mediaType == types.OCIImageIndex || m.mediaType == types.DockerManifestList
	switch {
	case !known(m.mediaType):
		return nil, fmt.Errorf("%w: media type %q", ErrBadManifest, event.Clip(string(m.mediaType), 120))
	case index && (raw.Config != nil || raw.Layers != nil):
		return nil, fmt.Errorf("%w: an index with a config or layers", ErrBadManifest)
	case !index && (raw.Config == nil || raw.Manifests != nil):
		return nil, fmt.Errorf("%w: an image manifest without a config, or with manifests", ErrBadManifest)
	}
	for _, d := range append(m.blobs, m.children...) {
		if _, err := parseDigest(d.Digest.String()); err != nil || d.Size < 0 {
			return nil, fmt.Errorf("%w: descriptor %q of size %d", ErrBadManifest, event.Clip(d.Digest.String(), 120), d.Size)
		}
	}
	return m, nil
}

// known reports whether the mirror serves manifests of media type t.
func known(t types.MediaType) bool {
	return slices.Contains(mediaTypes, t)
}

// accept is the Accept list sent upstream for a client's: the manifest
// media types the mirror serves that the client named, or all of them
// when it named none (or only wildcards).
func accept(client []string) string {
	var out []string
	for _, h := range client {
		for _, part := range strings.Split(h, ",") {
			t, _, _ := strings.Cut(part, ";")
			t = strings.TrimSpace(t)
			if known(types.MediaType(t)) && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	if out == nil {
		for _, t := range mediaTypes {
			out = append(out, string(t))
		}
	}
	return strings.Join(out, ", ")
}
