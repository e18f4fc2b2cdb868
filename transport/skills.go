package transport

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// The Skill routes (commands.Skills).
//
//	GET  /api/skills           → 200 [{id, name, description, emits}] in config order
//	POST /api/skills/:id/fire  → 200 {skill, events}: each type in its emits list
//	                             went out as a typed `event` frame, on
//	                             lathe.lattice.<type> and in /api/events/recent;
//	                             404 unknown Skill

func (s *skillRoutes) listSkills(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.skills)
}

func (s *skillRoutes) fireSkill(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.Fire(r.Context(), p.ByName("id"))
	respond(w, out, err)
}
