package transport

import (
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"
	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go"
	"github.com/swaggest/openapi-go/openapi31"

	"lathe/journal/events"
)

// The OpenAPI 3.1 document, generated from the route table and the Go
// types of the bodies (their json tags), with swaggest/openapi-go's 3.1
// reflector: it writes JSON Schema 2020-12, which OpenAPI 3.1 schemas are.
// What the schemas say of the wire is openapi_schema.go's; the /ws
// commands and frames are openapi_ws.go's.

// docRoutes serves the generated document, built on its first request.
type docRoutes struct {
	once sync.Once
	doc  []byte
	err  error
}

// openAPI is GET /api/openapi.json.
func (d *docRoutes) openAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	d.once.Do(func() { d.doc, d.err = OpenAPI() })
	if d.err != nil {
		fail(w, d.err)
		return
	}
	writeJSONBytes(w, http.StatusOK, d.doc)
}

// Security scheme names.
const (
	secAPIKey = "apiKey"
	secBearer = "bearer"
	secCookie = "cookie"
)

// uploadForm is a multipart/form-data upload: one file part; the route's
// summary names the other fields it reads.
type uploadForm struct {
	File *multipart.FileHeader `formData:"file" required:"true" description:"the one file part"`
}

// OpenAPI generates the OpenAPI 3.1 document of the route table.
func OpenAPI() ([]byte, error) {
	r := openapi31.NewReflector()
	spec := r.SpecEns()
	spec.SetTitle("Lathe")
	spec.SetVersion("1")
	spec.SetDescription("Lathe's HTTP API, generated from its route table (transport/routes.go). " +
		"Every error answers {\"error\": message}. The /ws WebSocket's commands and frames are the ws.command.* and ws.frame.* schemas, " +
		"and their discriminated unions ws.command (by cmd) and ws.frame (by kind), which the /ws operation names in x-lathe-ws.")
	// One server, the daemon itself: paths resolve against the origin the
	// document was fetched from.
	spec.WithServers(*(&openapi31.Server{URL: "/"}).WithDescription("The daemon that served this document"))
	spec.SetAPIKeySecurity(secAPIKey, "x-api-key", openapi.InHeader, "A configured server.api_keys entry.")
	spec.SetHTTPBearerTokenSecurity(secBearer, "", "A configured server.bearer_tokens entry.")
	spec.SetAPIKeySecurity(secCookie, SessionCookie, openapi.InCookie, "The session cookie the sign-in link sets.")
	r.AddTypeMapping(events.Text{}, textSchema{})
	r.AddTypeMapping(events.JSON{}, anyJSON{})
	r.DefaultOptions = append(r.DefaultOptions, jsonschema.InterceptNullability(allowNull),
		jsonschema.InterceptSchema(wireShapes(requestTypes())), // openapi_schema.go
		jsonschema.InterceptDefName(func(_ reflect.Type, name string) string { return schemaName.ReplaceAllString(name, "") }))
	ids := map[string]int{}
	for _, rt := range Routes() {
		if err := addOperation(r, rt, ids); err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", rt.Method, rt.Path, err)
		}
	}
	if err := addWSSchemas(r); err != nil {
		return nil, err
	}
	return json.Marshal(spec)
}

// textSchema is an events.Text's schema: a string, or a reference to the
// blob store ({"$blob": {sha256, size, preview}}) for large content.
type textSchema struct{}

func (textSchema) JSONSchema() (jsonschema.Schema, error) {
	var blob, ref, str, s jsonschema.Schema
	blob.AddType(jsonschema.Object)
	blob.WithRequired("$blob").WithPropertiesItem("$blob", (&jsonschema.Schema{}).WithType(jsonschema.Object.Type()).ToSchemaOrBool())
	ref = blob
	str.AddType(jsonschema.String)
	s.WithOneOf(str.ToSchemaOrBool(), ref.ToSchemaOrBool())
	return s, nil
}

// anyJSON is an events.JSON's schema: any JSON value, or a blob reference.
type anyJSON struct{}

func (anyJSON) JSONSchema() (jsonschema.Schema, error) { return jsonschema.Schema{}, nil }

// schemaName matches what a component name may not hold (generic type
// names' brackets).
var schemaName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// allowNull lets a slice, map or pointer field also be null: Go encodes a
// nil one as null, and the read models do not all make them empty.
func allowNull(params jsonschema.InterceptNullabilityParams) {
	sch := params.Schema
	switch {
	case sch == nil:
	case params.Type.Kind() == reflect.Pointer && sch.Ref != nil:
		ref := *sch.Ref
		var null jsonschema.Schema
		null.AddType(jsonschema.Null)
		*sch = jsonschema.Schema{}
		sch.WithAnyOf((&jsonschema.Schema{Ref: &ref}).ToSchemaOrBool(), null.ToSchemaOrBool())
	case sch.Ref != nil:
	case params.Type.Kind() == reflect.Slice, params.Type.Kind() == reflect.Map, params.Type.Kind() == reflect.Pointer:
		if sch.Type != nil && !sch.HasType(jsonschema.Null) {
			sch.AddType(jsonschema.Null)
		}
	}
}

func addOperation(r *openapi31.Reflector, rt Route, ids map[string]int) error {
	oc, err := r.NewOperationContext(rt.Method, openAPIPath(rt.Path))
	if err != nil {
		return err
	}
	name := handlerName(rt.Handle)
	id := name
	if ids[id]++; ids[id] > 1 {
		id = fmt.Sprintf("%s_%d", name, ids[id])
	}
	oc.SetID(id)
	oc.SetTags(rt.Tag)
	oc.SetSummary(rt.Summary)
	oc.SetDescription(fmt.Sprintf("Handler: %s. Auth: %s.", name, rt.Auth))
	if rt.Auth != AuthPublic {
		oc.AddSecurity(secAPIKey)
		oc.AddSecurity(secBearer)
		oc.AddSecurity(secCookie)
	}
	if params := paramsType(rt); params != nil {
		oc.AddReqStructure(reflect.New(params).Elem().Interface())
	}
	switch {
	case rt.Form:
		oc.AddReqStructure(uploadForm{})
	case rt.Request != nil:
		oc.AddReqStructure(rt.Request, openapi.WithContentType(mediaJSON))
	}
	if rt.Response != nil {
		for _, st := range append([]int{rt.Status}, rt.Also...) {
			if st == http.StatusNoContent { // no body
				oc.AddRespStructure(nil, openapi.WithHTTPStatus(st))
				continue
			}
			oc.AddRespStructure(rt.Response, openapi.WithHTTPStatus(st))
		}
	}
	for _, media := range rt.Content {
		if media == mediaJSON && rt.Response != nil {
			continue
		}
		format := ""
		if media == mediaBytes {
			format = "binary"
		}
		oc.AddRespStructure(nil, openapi.WithHTTPStatus(rt.Status), openapi.WithContentType(media), func(cu *openapi.ContentUnit) { cu.Format = format })
	}
	if rt.Response == nil && len(rt.Content) == 0 {
		oc.AddRespStructure(nil, openapi.WithHTTPStatus(rt.Status))
	}
	for _, st := range errorStatuses(rt) {
		body := any(errorBody{})
		if rt.Failure != nil && slices.Contains(rt.Errors, st) {
			body = rt.Failure
		}
		oc.AddRespStructure(body, openapi.WithHTTPStatus(st))
	}
	oc.AddRespStructure(errorBody{}, func(cu *openapi.ContentUnit) { cu.IsDefault = true; cu.Description = "An error: {error}" })
	// The extensions go in before AddOperation, which copies the operation
	// into the document.
	if o, ok := oc.(openapi31.OperationExposer); ok {
		op := o.Operation().WithMapOfAnythingItem("x-lathe-auth", string(rt.Auth)).WithMapOfAnythingItem("x-lathe-handler", name)
		if rt.Path == "/ws" {
			op.WithMapOfAnythingItem("x-lathe-ws", map[string]any{ // transport/openapi_ws.go
				"commands": map[string]string{"$ref": "#/components/schemas/" + wsCommandUnion},
				"frames":   map[string]string{"$ref": "#/components/schemas/" + wsFrameUnion},
			})
		}
		if rt.Auth == AuthPublic {
			// "security": [], no credential: the reflector's Security field
			// is omitempty, so the empty list goes in beside its fields.
			op.WithMapOfAnythingItem("security", []map[string][]string{})
		}
	}
	return r.AddOperation(oc)
}

// orError is the body of a route's own error statuses that have a failure
// body F (Route.Failure): F, or {error} alone, as a refusal before the
// work began answers.
type orError[F any] struct{}

// JSONSchemaAnyOf is the body's two shapes, for the reflector.
func (orError[F]) JSONSchemaAnyOf() []any {
	var f F
	return []any{f, errorBody{}}
}

// errorStatuses are a route's own error statuses and those of its class:
// 401, 403 (Origin) and 429 behind authentication, 400, 413 and 415 for a
// body, 404 for a path parameter, 500 always.
func errorStatuses(rt Route) []int {
	out := slices.Clone(rt.Errors)
	if rt.Auth != AuthPublic {
		out = append(out, http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests)
	}
	if rt.Request != nil || rt.Form || len(rt.Query) > 0 {
		out = append(out, http.StatusBadRequest)
	}
	if rt.Request != nil || rt.Form {
		out = append(out, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	if strings.Contains(rt.Path, ":") {
		out = append(out, http.StatusNotFound)
	}
	out = append(out, http.StatusInternalServerError)
	slices.Sort(out)
	return slices.Compact(out)
}

// openAPIPath turns httprouter's :name and *name into {name}.
func openAPIPath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// pathParams are the names of a table path's parameters.
func pathParams(path string) []string {
	var out []string
	for _, s := range strings.Split(path, "/") {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			out = append(out, s[1:])
		}
	}
	return out
}

// paramsType is a struct type whose fields are the route's path and query
// parameters, tagged for the reflector; nil when it has none.
func paramsType(rt Route) reflect.Type {
	var fields []reflect.StructField
	for i, p := range pathParams(rt.Path) {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("P%d", i), Type: reflect.TypeFor[string](),
			Tag: reflect.StructTag(fmt.Sprintf(`path:%q required:"true"`, p))})
	}
	for i, q := range rt.Query {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Q%d", i), Type: reflect.TypeFor[string](),
			Tag: reflect.StructTag(fmt.Sprintf(`query:%q`, q))})
	}
	if len(fields) == 0 {
		return nil
	}
	return reflect.StructOf(fields)
}

// handlerName names a route's handler as Go does: "sessionRoutes.getSession"
// for a method value, "serveIndex" for a function.
func handlerName(h httprouter.Handle) string {
	fn := runtime.FuncForPC(reflect.ValueOf(h).Pointer())
	if fn == nil {
		return "handler"
	}
	name := fn.Name()
	name = name[strings.LastIndex(name, "/")+1:]
	name = strings.TrimPrefix(name, "transport.")
	name = strings.TrimSuffix(name, "-fm")
	if i := strings.Index(name, ".func"); i >= 0 {
		name = name[:i] // a closure: the function that made it
		name = name[strings.LastIndex(name, ".")+1:]
	}
	return strings.NewReplacer("(*", "", ")", "").Replace(name)
}
