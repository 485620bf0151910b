package handle

import "reflect"

// IsNil reports whether h is nil or an interface holding a nil pointer,
// interface, func, map, slice or chan (a nil *pgxpool.Pool in a DBTX, say),
// which a plain h == nil does not catch.
func IsNil(h any) bool {
	if h == nil {
		return true
	}
	switch v := reflect.ValueOf(h); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}
