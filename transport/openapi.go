package transport

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// docRoutes serves the generated OpenAPI document.
type docRoutes struct{}

func (d *docRoutes) openAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]any{})
}
