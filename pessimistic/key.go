package pessimistic

// Key is the type of row keys the adapters' LockRows accept.
type Key interface {
	~int | ~int32 | ~int64 | ~string
}
