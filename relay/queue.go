package relay

import (
	"container/list"
	"iter"
	"slices"
	"time"
)

// priority is a waiting request's class: high before normal before low, first come first
// served within a class.
type priority uint8

const (
	priorityHigh priority = iota
	priorityNormal
	priorityLow
	classes
)

// priorityNames name the classes, by class.
var priorityNames = [classes]string{priorityHigh: "high", priorityNormal: "normal", priorityLow: "low"}

// parsePriority reads a priority name; ok is false (and p normal) for anything else.
func parsePriority(s string) (p priority, ok bool) {
	for c, name := range priorityNames {
		if s == name {
			return priority(c), true
		}
	}
	return priorityNormal, false
}

// IsPriority reports whether name is a priority class: high, normal or low.
func IsPriority(name string) bool {
	_, ok := parsePriority(name)
	return ok
}

// classLists are queued requests in queue order, one list per class.
type classLists [classes]list.List

func (c *classLists) len() int { return c[0].Len() + c[1].Len() + c[2].Len() }

// requestQueue is a pool's queue: per class, one list in queue order, plus the same per model,
// so a member that frees a slot finds the request it should take next without walking the
// requests for other models. Requeued requests go to the front of their class.
//
// Order: the class a waiter counts in rises one step for every aging it has waited (from its
// arrival), so nothing starves; among equal classes the one queued first goes first. Only
// the head of each class list can be next (it has waited longest in its class), so choosing
// looks at three requests per model at most.
type requestQueue struct {
	all     classLists
	byModel map[string]*classLists
	aging   time.Duration
	front   int64 // order of the last request pushed to the front (decreasing)
	back    int64 // order of the last request pushed to the back (increasing)
}

func (q *requestQueue) len() int { return q.all.len() }

func (q *requestQueue) push(req *Request, front bool) {
	l := q.byModel[req.Model]
	if l == nil {
		l = new(classLists)
		q.byModel[req.Model] = l
	}
	c := req.priority
	if front {
		q.front--
		req.order = q.front
		req.elem = q.all[c].PushFront(req)
		req.modelElem = l[c].PushFront(req)
	} else {
		q.back++
		req.order = q.back
		req.elem = q.all[c].PushBack(req)
		req.modelElem = l[c].PushBack(req)
	}
}

func (q *requestQueue) remove(req *Request) {
	c := req.priority
	q.all[c].Remove(req.elem)
	if l := q.byModel[req.Model]; l != nil {
		l[c].Remove(req.modelElem)
		if l.len() == 0 {
			delete(q.byModel, req.Model)
		}
	}
	req.elem, req.modelElem = nil, nil
}

// rank is where a waiter stands at now: its class after aging, then its queue order.
func (q *requestQueue) rank(req *Request, now *clock) (class int, order int64) {
	class = int(req.priority)
	if class > 0 && q.aging > 0 {
		class = max(0, class-int(now.get().Sub(req.arrival)/q.aging))
	}
	return class, req.order
}

// first is the request of l that goes next.
func (q *requestQueue) first(l *classLists, now *clock) *Request {
	var best *Request
	var bestClass int
	var bestOrder int64
	for c := range l {
		e := l[c].Front()
		if e == nil {
			continue
		}
		r := e.Value.(*Request)
		if best == nil && l[c].Len() == l.len() {
			return r // the only class waiting: no clock needed
		}
		class, order := q.rank(r, now)
		if best == nil || class < bestClass || (class == bestClass && order < bestOrder) {
			best, bestClass, bestOrder = r, class, order
		}
	}
	return best
}

// next is any waiting request, in the order they go.
func (q *requestQueue) next(now *clock) *Request { return q.first(&q.all, now) }

// nextFor is the request m should take next among those whose model it serves: one of the
// models it names, or for a catch-all member (m.star) any model serves allows.
func (q *requestQueue) nextFor(m *member, serves func(model string) bool, now *clock) *Request {
	if !m.star {
		return q.nextAmong(slices.Values(m.models), now)
	}
	if r := q.next(now); r == nil || serves(r.Model) {
		return r // the common case: the head of the whole queue
	}
	return q.nextAmong(func(yield func(string) bool) {
		for model := range q.byModel {
			if serves(model) && !yield(model) {
				return
			}
		}
	}, now)
}

// nextAmong is the request that goes next among the waiters for models.
func (q *requestQueue) nextAmong(models iter.Seq[string], now *clock) *Request {
	var best *Request
	var bestClass int
	var bestOrder int64
	ranked := false // best is ranked only once another model has a waiter too
	for model := range models {
		l := q.byModel[model]
		if l == nil {
			continue
		}
		r := q.first(l, now)
		if best == nil {
			best = r
			continue
		}
		if !ranked {
			bestClass, bestOrder = q.rank(best, now)
			ranked = true
		}
		if class, order := q.rank(r, now); class < bestClass || (class == bestClass && order < bestOrder) {
			best, bestClass, bestOrder = r, class, order
		}
	}
	return best
}

// newestBelow is the waiter a full queue sheds for an arrival of class c: among waiters whose
// class, after aging, is strictly lower than c, the newest of the lowest class; or nil. (Only
// the newest of each list can be that one: it has aged least.)
func (q *requestQueue) newestBelow(c priority, now *clock) *Request {
	var shed *Request
	shedClass, shedOrder := int(c), int64(0)
	for low := classes - 1; low > c; low-- {
		e := q.all[low].Back()
		if e == nil {
			continue
		}
		r := e.Value.(*Request)
		if class, order := q.rank(r, now); class > shedClass || (shed != nil && class == shedClass && order > shedOrder) {
			shed, shedClass, shedOrder = r, class, order
		}
	}
	return shed
}
