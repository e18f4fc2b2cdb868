package projections

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"testing"
	"time"
)

// What gob loses (nil against empty, pointers to zero values), the shape
// gives back, at any depth: in pointers, slices, map values.
func TestShapeRestoresWhatGobLoses(t *testing.T) {
	type inner struct {
		List  []string
		Ptr   *int
		Set   map[string]bool
		At    time.Time
		Bytes []byte
	}
	type value struct {
		Nil, Empty       []string
		NilPtr, ZeroPtr  *string
		NilMap, EmptyMap map[string]int
		Inners           []inner
		ByKey            map[string]inner
		PtrToZero        *inner
		Full             inner
		PtrToEmptyInner  *inner
		ZeroFloat        *float64
	}
	zero, empty := 0.0, ""
	in := value{Empty: []string{}, ZeroPtr: &empty, EmptyMap: map[string]int{},
		Inners:          []inner{{}, {List: []string{}, Set: map[string]bool{}, Bytes: []byte{}}, {List: []string{"a"}, Ptr: new(int)}},
		ByKey:           map[string]inner{"b": {List: []string{}}, "a": {Set: map[string]bool{"x": false}}},
		PtrToZero:       &inner{},
		Full:            inner{List: []string{"x"}, At: time.Unix(1, 2).UTC()},
		PtrToEmptyInner: &inner{List: []string{}},
		ZeroFloat:       &zero,
	}
	var buf bytes.Buffer
	shape := shapeOf(&in)
	if err := gob.NewEncoder(&buf).Encode(&in); err != nil {
		t.Fatal(err)
	}
	var out value
	if err := gob.NewDecoder(&buf).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(in, out) {
		t.Fatal("gob kept everything: the test tests nothing")
	}
	if !reshape(&out, shape) || !reflect.DeepEqual(in, out) {
		t.Errorf("reshaped:\n got %#v\nwant %#v", out, in)
	}
	// A shape that does not fit is refused.
	for _, bad := range [][]byte{shape[:len(shape)-1], append(bytes.Clone(shape), 1), {2}} {
		var v value
		if reshape(&v, bad) {
			t.Errorf("reshape accepted %v", bad)
		}
	}
}
