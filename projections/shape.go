package projections

import (
	"cmp"
	"encoding/gob"
	"fmt"
	"reflect"
	"slices"
)

// gob, which stores the small read models in the checkpoint, omits every
// zero value: an empty slice or map comes back nil, and a pointer to a
// zero value ("" for an overlay's prompt, 0 for a typed event's tokens)
// comes back nil. The fold makes both, and the routes answer them apart
// ([] or null, "" or nothing). So the checkpoint stores beside the value
// its shape: for every pointer, slice and map reachable from it, in a
// fixed order, whether it was nil; and restore gives back, where gob left
// nil, the empty or zero value that was there. The pass is driven by
// reflection over the types, like gob, so a field added to a read model is
// covered without a word here.

// shapeOf records the shape of *v.
func shapeOf(v any) []byte {
	sh := shaper{}
	sh.walk(reflect.ValueOf(v).Elem())
	return sh.b
}

// reshape gives *v, as gob decoded it, the shape recorded; false when the
// shape does not fit the value.
func reshape(v any, shape []byte) bool {
	sh := shaper{b: shape, restore: true}
	sh.walk(reflect.ValueOf(v).Elem())
	return !sh.bad && sh.i == len(sh.b)
}

// shaper walks a value in a fixed order: fields in declaration order
// (exported ones only, as gob), elements in index order, map entries in
// key order. Recording, it appends one byte per pointer, slice and map: 1
// when not nil. Restoring, it reads them back and fills what gob left nil.
type shaper struct {
	b       []byte
	i       int
	restore bool
	bad     bool
}

var gobEncoder = reflect.TypeFor[gob.GobEncoder]()

// present records or restores whether v (a pointer, slice or map) is nil,
// and reports whether it is not.
func (sh *shaper) present(v reflect.Value) bool {
	if !sh.restore {
		sh.b = append(sh.b, boolByte(!v.IsNil()))
		return !v.IsNil()
	}
	if sh.i >= len(sh.b) || sh.b[sh.i] > 1 {
		sh.bad = true
		return false
	}
	set := sh.b[sh.i] == 1
	sh.i++
	if !set {
		if !v.IsNil() {
			sh.bad = true // gob never makes what was not there
		}
		return false
	}
	if v.IsNil() {
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
		}
	}
	return true
}

func (sh *shaper) walk(v reflect.Value) {
	if sh.bad {
		return
	}
	t := v.Type()
	if t.Implements(gobEncoder) || reflect.PointerTo(t).Implements(gobEncoder) {
		return // its own encoding (time.Time): gob gives it back whole
	}
	switch v.Kind() {
	case reflect.Pointer:
		if sh.present(v) {
			sh.walk(v.Elem())
		}
	case reflect.Slice:
		if sh.present(v) && t.Elem().Kind() != reflect.Uint8 {
			for i := range v.Len() {
				sh.walk(v.Index(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			sh.walk(v.Index(i))
		}
	case reflect.Map:
		if !sh.present(v) {
			return
		}
		keys := v.MapKeys()
		key := func(k reflect.Value) string { return fmt.Sprint(k.Interface()) }
		if t.Key().Kind() == reflect.String {
			key = reflect.Value.String
		}
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(key(a), key(b)) })
		for _, k := range keys {
			// A map's value is not addressable: walk a copy, and put it
			// back when restoring.
			e := reflect.New(t.Elem()).Elem()
			e.Set(v.MapIndex(k))
			sh.walk(e)
			if sh.restore {
				v.SetMapIndex(k, e)
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				sh.walk(v.Field(i))
			}
		}
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
