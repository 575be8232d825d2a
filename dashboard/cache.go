package dashboard

import (
	"container/list"
	"sync"
	"time"
)

// ttlCache keeps at most max answers for ttl each, evicting the least recently
// used first: a flood of new keys (bad tokens, many users) costs its own entries,
// never the others' all at once. Written here, not taken from a library: the
// dashboard needs only this, and k8s.io/utils' LRU has no expiry.
type ttlCache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // of *ttlEntry[K, V], most recent first
	byKey map[K]*list.Element
}

type ttlEntry[K comparable, V any] struct {
	key     K
	value   V
	expires time.Time
}

func newTTLCache[K comparable, V any](max int, ttl time.Duration) *ttlCache[K, V] {
	return &ttlCache[K, V]{max: max, ttl: ttl, order: list.New(), byKey: map[K]*list.Element{}}
}

// get returns the value of key when it has not expired.
func (c *ttlCache[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.byKey[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*ttlEntry[K, V])
	if time.Now().After(e.expires) {
		c.order.Remove(el)
		delete(c.byKey, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

func (c *ttlCache[K, V]) put(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		e := el.Value.(*ttlEntry[K, V])
		e.value, e.expires = value, time.Now().Add(c.ttl)
		c.order.MoveToFront(el)
		return
	}
	c.byKey[key] = c.order.PushFront(&ttlEntry[K, V]{key: key, value: value, expires: time.Now().Add(c.ttl)})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*ttlEntry[K, V]).key)
	}
}
