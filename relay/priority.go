package relay

import "modelrelay/relay/keys"

// What class a request may wait in. A client names its class (x_pool_options.priority, else
// the x-modelrelay-priority header) or takes its default (its key's priority, else normal),
// and may ask for any class down to low; it may never rise above its ceiling: its key's
// max_priority, else the key's priority, else normal, and without a key (none sent, or keys do
// not apply on the route) the server's max_client_priority. Otherwise any client could take
// high and hold every other one back.

// keyClasses are a key's default class and its ceiling. A name a store holds that is none
// (the admin API refuses them, a hand-edited row may not) counts as unset.
func keyClasses(l keys.Limits) (def, ceiling priority) {
	def, _ = parsePriority(l.Priority) // normal when unset
	ceiling = def
	if c, ok := parsePriority(l.MaxPriority); ok {
		ceiling = c
	}
	return def, ceiling
}

// admitClass is the class a request waits in, given the name it asked for ("" = none), its
// default and its ceiling; capped reports that it asked above its ceiling. A request asking
// too high is served at its ceiling, not refused: its class is a wish about order, and the
// client still wants its answer. ok is false for a name that is no class.
func admitClass(asked string, def, ceiling priority) (p priority, capped, ok bool) {
	p = def
	if asked != "" {
		if p, ok = parsePriority(asked); !ok {
			return priorityNormal, false, false
		}
	}
	if p < ceiling { // a smaller number is a higher class
		return ceiling, true, true
	}
	return p, false, true
}
