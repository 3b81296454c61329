package ingress

import "slices"

// Routing by model (the apex, the aggregation hosts, and inference on the relay's own host)
// serves a caller from the circuits it may use among those serving the model, and lists
// exactly the models it could be served. A circuit it may not use is answered as a model
// nobody serves: a 401 or 403 there would reveal a private model's name that the listing
// hides. (The circuit's own host still answers 401/403: its name is no secret to whoever
// holds it.)

// PoolsFor names the pools that serve model to caller, in order of preference: of pools (the
// circuit pools serving the model, in order), those whose circuit the caller may use; when it
// may use none, own alone (the relay's own pool: relay workers and static backends). A pool
// that is no circuit of t is skipped.
func (t *Table) PoolsFor(caller Caller, pools []string, own string) []string {
	var candidates []*Circuit
	for _, pool := range pools {
		if c := t.ByPool(pool); c != nil {
			candidates = append(candidates, c)
		}
	}
	kept, _ := caller.Filter(candidates) // why none is left stays unsaid, see above
	if len(kept) == 0 {
		return []string{own}
	}
	names := make([]string, len(kept))
	for i, c := range kept {
		names[i] = c.Pool
	}
	return names
}

// Models lists the models caller may use, as the OpenAI model list shows them: those of
// modelPools (model -> the circuit pools serving it) served by a circuit the caller may use,
// sorted, then the models of own (the relay's own pool, in its order) not listed already.
func (t *Table) Models(caller Caller, modelPools map[string][]string, own []string) []string {
	var models []string
	for model, pools := range modelPools {
		for _, pool := range pools {
			if c := t.ByPool(pool); c != nil && caller.Reaches(c) {
				models = append(models, model)
				break
			}
		}
	}
	slices.Sort(models)
	for _, m := range own {
		if !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	return models
}
