package relay

import "container/list"

// requestQueue is a pool's FIFO: one list in queue order, plus one per model, so a member
// that frees a slot finds the oldest request it can serve without walking the requests for
// other models. Requeued requests go to the front of both.
type requestQueue struct {
	all     list.List
	byModel map[string]*list.List
	front   int64 // order of the last request pushed to the front (decreasing)
	back    int64 // order of the last request pushed to the back (increasing)
}

func (q *requestQueue) len() int { return q.all.Len() }

func (q *requestQueue) push(req *Request, front bool) {
	l := q.byModel[req.Model]
	if l == nil {
		l = list.New()
		q.byModel[req.Model] = l
	}
	if front {
		q.front--
		req.order = q.front
		req.elem = q.all.PushFront(req)
		req.modelElem = l.PushFront(req)
	} else {
		q.back++
		req.order = q.back
		req.elem = q.all.PushBack(req)
		req.modelElem = l.PushBack(req)
	}
}

func (q *requestQueue) remove(req *Request) {
	q.all.Remove(req.elem)
	if l := q.byModel[req.Model]; l != nil {
		l.Remove(req.modelElem)
		if l.Len() == 0 {
			delete(q.byModel, req.Model)
		}
	}
	req.elem, req.modelElem = nil, nil
}

func (q *requestQueue) oldest() *Request {
	if e := q.all.Front(); e != nil {
		return e.Value.(*Request)
	}
	return nil
}

// oldestFor is the request m should take next: the oldest one whose model it serves.
func (q *requestQueue) oldestFor(m *member) *Request {
	if m.star {
		return q.oldest()
	}
	var best *Request
	for _, model := range m.models {
		l := q.byModel[model]
		if l == nil {
			continue
		}
		if r := l.Front().Value.(*Request); best == nil || r.order < best.order {
			best = r
		}
	}
	return best
}
