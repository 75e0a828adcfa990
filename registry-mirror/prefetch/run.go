package prefetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// Fetcher fetches items through the mirror at Base ("http://ADDR/").
type Fetcher struct {
	HTTP *http.Client
	Base string
}

// Result is what became of one item.
type Result struct {
	Item
	// Files is how many artifacts were fetched (a PyPI pin can have
	// several), Bytes their size.
	Files int
	Bytes int64
	Err   error
}

// ErrLockMismatch is returned for an artifact whose bytes, as the mirror
// verified and served them, do not match the hash the lockfile pins.
var ErrLockMismatch = errors.New("prefetch: the lockfile's hash differs from what the registry serves")

// Run fetches every item, one after the other, calling progress after
// each.
func (f *Fetcher) Run(ctx context.Context, items []Item, progress func(done, total int)) []Result {
	out := make([]Result, len(items))
	for i, it := range items {
		out[i] = f.one(ctx, it)
		if progress != nil {
			progress(i+1, len(items))
		}
	}
	return out
}

func (f *Fetcher) one(ctx context.Context, it Item) Result {
	r := Result{Item: it}
	if it.Ecosystem != resolver.PyPI {
		n, err := f.get(ctx, f.Base+it.Path, it.Want)
		r.Files, r.Bytes, r.Err = 1, n, err
		if err != nil {
			r.Files = 0
		}
		return r
	}
	files, err := f.pypiFiles(ctx, it)
	if err != nil {
		r.Err = err
		return r
	}
	for _, u := range files {
		n, err := f.get(ctx, u.url, u.want)
		if err != nil {
			r.Err = err
			return r
		}
		r.Files++
		r.Bytes += n
	}
	return r
}

// get fetches url and checks the bytes against want: the digests a
// lockfile pins of this one artifact, every one of which must match.
func (f *Fetcher) get(ctx context.Context, url string, want []verify.Digest) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("prefetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, refusal(resp)
	}
	vr, err := verify.NewReader(resp.Body, 0, false, want...)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, vr)
	if errors.Is(err, verify.ErrMismatch) {
		return n, fmt.Errorf("%w: %s: %v", ErrLockMismatch, url, err)
	}
	if err != nil {
		return n, fmt.Errorf("prefetch: reading %s: %w", url, err)
	}
	return n, nil
}

// refusal reads the mirror's error.
func refusal(resp *http.Response) error {
	var e struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	return fmt.Errorf("prefetch: %s: %s", resp.Status, event.Clip(e.Error, 100))
}

// pypiFile is one file to fetch of a pin.
type pypiFile struct {
	url  string
	want []verify.Digest
}

// pypiFiles lists the files of it's version on its project page: those
// the lockfile pins by hash, or every file of the version when it pins
// none.
func (f *Fetcher) pypiFiles(ctx context.Context, it Item) ([]pypiFile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.Base+it.Path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json")
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, refusal(resp)
	}
	var page struct {
		Files []struct {
			Filename string            `json:"filename"`
			URL      string            `json:"url"`
			Hashes   map[string]string `json:"hashes"`
		} `json:"files"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxFile)).Decode(&page); err != nil {
		return nil, fmt.Errorf("prefetch: the mirror's page of %s: %w", it.Name, err)
	}
	var out []pypiFile
	for _, file := range page.Files {
		v, _, err := listing.FileVersion(it.Name, file.Filename)
		if err != nil || v != it.Version {
			continue
		}
		d, err := verify.Hex(verify.SHA256, file.Hashes[verify.SHA256])
		if err != nil || (len(it.Want) > 0 && !containsDigest(it.Want, d)) {
			continue
		}
		ref, err := url.Parse(file.URL)
		if err != nil {
			continue
		}
		u := resp.Request.URL.ResolveReference(ref).String()
		out = append(out, pypiFile{url: u, want: []verify.Digest{d}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prefetch: %s==%s: no file on the mirror's page matches the pin", it.Name, it.Version)
	}
	return out, nil
}

func containsDigest(ds []verify.Digest, d verify.Digest) bool {
	for _, x := range ds {
		if x.Alg == d.Alg && bytes.Equal(x.Sum, d.Sum) {
			return true
		}
	}
	return false
}
