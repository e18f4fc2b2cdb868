package transport

import (
	"fmt"
	"strings"
)

// APITable is the README's API table, generated from the route table:
// one row per path and handler, its methods together.
func APITable() string {
	type row struct {
		methods []string
		rt      Route
	}
	var rows []*row
	index := map[string]*row{}
	for _, rt := range Routes() {
		key := rt.Path + " " + handlerName(rt.Handle)
		if r, ok := index[key]; ok {
			r.methods = append(r.methods, rt.Method)
			continue
		}
		r := &row{methods: []string{rt.Method}, rt: rt}
		index[key] = r
		rows = append(rows, r)
	}
	var b strings.Builder
	b.WriteString("| Method | Path | Auth | Handler | |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | `%s` | %s | `%s` | %s |\n", strings.Join(r.methods, ", "), openAPIPath(r.rt.Path), r.rt.Auth,
			handlerName(r.rt.Handle), strings.ReplaceAll(r.rt.Summary, "|", `\|`))
	}
	return b.String()
}
