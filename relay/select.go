package relay

import (
	"time"

	"modelrelay/relay/prefix"
)

// Selection chooses the member that gets a request. It is a row of small rules, each in its
// own file with its own table test, composed once, in order, by pickLocked:
//
//  1. serving (select_serve.go): the members that serve the model, by exact name before the
//     catch-alls;
//  2. eligible and least loaded (select_gather.go): of those, the ones that may take the
//     request now, the lowest load among them and the ones at it;
//  3. the request's wishes, where the first rule that picks decides: preferred
//     (select_prefer.go), then with cache-aware routing affinity (select_affinity.go) and
//     prefixMatch (select_prefix.go), these two only within the load bound (select_bound.go);
//  4. weights (select_weights.go): a least loaded one, by round robin, or by smooth weighted
//     round robin when weights differ or a target is in slow start.
//
// Every rule works on one candidates value that the pool keeps and reuses under its lock, so
// selection allocates nothing and takes no lock but the pool's.

// A policy is one rule of selection that may decide: it picks one of the candidates, or nil
// to leave the choice to the rules after it.
type policy interface {
	pick(c *candidates) *member
}

// candidates is one selection's working set: the members that serve the model, which of them
// are eligible, the lowest load among those and the ones at it, and what the request asks
// beyond its model. The pool keeps one and reuses it under its lock.
type candidates struct {
	served  []*member // the members that serve the model, in registration order
	avoid   *member   // the target a retry must not return to
	lowest  float64   // the lowest load among the eligible
	least   []tied    // the eligible at the lowest load, in registration order
	cursor  uint64    // seq of the member chosen last for the model: round robin starts after it
	ramping bool      // a member of the pool is in slow start: ties go by the weights now
	wish    wish
}

// tied is one of the least loaded, with what round robin reads of it copied beside it: the
// pass that splits the tie then reads one short list, not the members again (with a thousand
// targets they have left the L1 cache by then, and reading them again cost a fifth more
// cache misses per dispatch).
type tied struct {
	m      *member
	seq    uint64
	weight float64
}

// wish is what a request asks of selection beyond its model, read once per selection.
type wish struct {
	prefer     string // a target's id or name (prefer_gpu)
	session    uint64 // seq of the target that served the session last, when hasSession
	hasSession bool
	// blocks are the prompt's blocks, for a request without a remembered session only: a
	// session whose target is past the load bound gets plain least load, not its prefix's
	// target (the session moves, and its prompt follows it there).
	blocks []uint64
}

// read sets w from req. sessions is nil when the pool does not place by cache (least_load):
// then only prefer counts.
func (w *wish) read(req *Request, sessions *prefix.Sessions) {
	*w = wish{prefer: req.prefer}
	pr := req.prompt
	if pr == nil || sessions == nil {
		return
	}
	if pr.Session != "" {
		w.session, w.hasSession = sessions.Get(pr.Session, time.Now())
	}
	if !w.hasSession {
		w.blocks = pr.Blocks
	}
}

// selectionRules are the policies that read a request's wishes, in the order they apply: a
// preferred target with room always wins; with cache-aware routing, then the session's last
// target, then the target holding the prompt's prefix.
func selectionRules(sched *Scheduling, sessions *prefix.Sessions, prefixes *prefix.Index) []policy {
	rules := []policy{preferred{}}
	if sched.CacheAware {
		bound := newLoadBound(sched.AffinitySlack)
		rules = append(rules, affinity{bound: bound},
			prefixMatch{index: prefixes, bound: bound, minMatch: sched.PrefixMinMatch})
	}
	return rules
}

// pickLocked chooses the member for model, other than avoid, by the rules above; known
// reports whether any member serves the model at all, available or not. req is nil for a
// question about free capacity (hasFree): then no wish counts.
func (p *Pool) pickLocked(model string, avoid *member, req *Request) (chosen *member, known bool) {
	var now clock
	served := p.servingLocked(model, &now)
	if len(served) == 0 {
		return nil, false
	}
	c := &p.sel
	c.gather(served, avoid)
	if len(c.least) == 0 {
		return nil, true
	}
	c.cursor = p.cursor[model]
	c.ramping = len(p.ramping) > 0
	if req != nil && (req.prefer != "" || req.prompt != nil) {
		c.wish.read(req, p.sessions)
		for _, rule := range p.rules {
			if m := rule.pick(c); m != nil {
				return m, true
			}
		}
	}
	return weights{}.pick(c), true
}
