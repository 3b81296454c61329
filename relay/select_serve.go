package relay

// servingLocked returns the members that serve model, in registration order (serving). Every
// selection starts here, so this is where slow-start weights are brought up to date
// (rampLocked; kept out of the selection loop, which measured slower with it there).
func (p *Pool) servingLocked(model string, now *clock) []*member {
	if len(p.ramping) > 0 {
		p.rampLocked()
	}
	named, stars := p.indexLocked(model)
	return serving(named, stars, now)
}

// serving is the rule "exact name before catch-all": a model finds its targets by name
// first. named, the members that name it, serve it while any of them can still take work
// (namedServe); stars, the catch-all members (models "*"), serve only a model that no such
// member names: one nobody names, or one whose named targets are all down, which would
// otherwise be refused. A catch-all is often another deployment altogether (a cloud endpoint,
// a proxy), so it takes no overflow from a named model's busy targets.
func serving(named, stars []*member, now *clock) []*member {
	if len(stars) == 0 || namedServe(named, now) {
		return named
	}
	return stars
}

// namedServe reports whether any of named, the members naming a model, can still take work:
// not draining and live (a busy one can, and requests wait for it; a breaker-open one cannot
// until its cool-down ends).
func namedServe(named []*member, now *clock) bool {
	for _, m := range named {
		if !m.draining && m.live(now) {
			return true
		}
	}
	return false
}

// indexLocked returns the members that name model and those that serve any model, each in
// registration order. The index is rebuilt only after membership or models changed.
func (p *Pool) indexLocked(model string) (named, stars []*member) {
	if p.index == nil {
		p.index = make(map[string][]*member)
		p.stars = p.stars[:0]
		for _, m := range p.members {
			if m.star {
				p.stars = append(p.stars, m)
			}
			for _, name := range m.models {
				p.index[name] = append(p.index[name], m)
			}
		}
	}
	return p.index[model], p.stars
}
