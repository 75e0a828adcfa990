package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// ErrBadTags: the upstream's tag list does not parse or names another
// repository.
var ErrBadTags = errors.New("oci: bad tag list")

// tagList is the distribution API's tag list.
type tagList struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// serveTags serves a repository's tag list, fetched from the upstream with
// the client's page size (n) and start (last), the tags that are not valid
// tags dropped. The upstream's Link to a next page is not passed on: it
// names the upstream.
func (h *Handler) serveTags(w http.ResponseWriter, r *http.Request, name string) error {
	q := url.Values{}
	if n := r.URL.Query().Get("n"); n != "" {
		if v, err := strconv.Atoi(n); err != nil || v < 0 || v > 10000 {
			return fetch.Errorf(http.StatusBadRequest, "bad_request", err, "n must be a number of tags up to 10000")
		}
		q.Set("n", n)
	}
	if last := r.URL.Query().Get("last"); last != "" {
		if !tagRE.MatchString(last) {
			return fetch.Errorf(http.StatusBadRequest, "bad_reference", ErrBadReference, "last %q is not a valid tag", event.Clip(last, 120))
		}
		q.Set("last", last)
	}
	u := h.upstream + name + "/tags/list"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	b, _, err := h.env.Upstream.GetMeta(r.Context(), u, "application/json")
	if err != nil {
		return err
	}
	tl, err := parseTags(name, b)
	if err != nil {
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "the upstream's tag list of %s: %v", name, err)
	}
	out, err := json.Marshal(tl)
	if err != nil {
		return fmt.Errorf("encoding a tag list: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(append(out, '\n'))
	return err
}

// parseTags reads the upstream's tag list of name, keeping the valid tags.
func parseTags(name string, b []byte) (*tagList, error) {
	var tl tagList
	if err := json.Unmarshal(b, &tl); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTags, err)
	}
	if tl.Name != name {
		return nil, fmt.Errorf("%w: it names %q", ErrBadTags, event.Clip(tl.Name, 120))
	}
	valid := tl.Tags[:0]
	for _, t := range tl.Tags {
		if tagRE.MatchString(t) {
			valid = append(valid, t)
		}
	}
	tl.Tags = valid
	if tl.Tags == nil {
		tl.Tags = []string{}
	}
	return &tl, nil
}
