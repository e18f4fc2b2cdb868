package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxModelsBody bounds a /models answer.
const maxModelsBody = 4 << 20

// hostedOpenAI reports whether an openai-kind base URL is OpenAI's own API
// (the SDK's default when empty), the one OpenAI-compatible endpoint the
// curated list describes. Every other server (vLLM, llama.cpp, LM Studio,
// a proxy) is asked what it serves.
func hostedOpenAI(base string) bool {
	if base == "" {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// openAIModels asks an OpenAI-compatible server for GET {base_url}/models
// within the probe timeout, with the provider's key as a Bearer token when
// its variable is set.
func (c *Catalog) openAIModels(ctx context.Context, p Provider) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.BaseURL, "/")+"/models", nil)
	if err != nil {
		return nil, errors.New(scrub(err.Error(), p.BaseURL))
	}
	if p.APIKeyEnv != "" {
		if key, ok := c.lookupEnv(p.APIKeyEnv); ok && key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from /models within %s", c.timeout)
		}
		return nil, errors.New(scrub(err.Error(), p.BaseURL))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody+1))
	if err != nil {
		return nil, errors.New(scrub(err.Error(), p.BaseURL))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /models answered %s", resp.Status)
	}
	if len(body) > maxModelsBody {
		return nil, fmt.Errorf("GET /models answered more than %d MiB", maxModelsBody>>20)
	}
	return ParseModelIDs(body)
}

// ParseModelIDs reads the model IDs of an OpenAI-compatible GET /models
// answer ({"data": [{"id": …}, …]}), in order, without duplicates or empty
// IDs. Anything else is an error.
func ParseModelIDs(body []byte) ([]string, error) {
	var list struct {
		Data *[]struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /models answered no model list: %v", err)
	}
	if list.Data == nil {
		return nil, errors.New(`GET /models answered no "data" list`)
	}
	seen := map[string]bool{}
	ids := []string{}
	for _, m := range *list.Data {
		if m.ID != "" && !seen[m.ID] {
			seen[m.ID] = true
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}
