package relay

import (
	"encoding/json"
	"errors"

	"modelrelay/relay/rawjson"
	"modelrelay/relay/usage"
)

// This file edits the top level of a client's body without decoding the rest: x_pool_options
// is the relay's, never a target's; a key's accounting may need an OpenAI stream to report
// its usage; a fallback sends the body with another model. Everything else travels byte for
// byte. The edits are made where the body's one read (parseInference) found the members, and
// all that apply at once are made in one pass that builds one new body.

// rewrite returns the body v was read from as a target receives it: without x_pool_options,
// and asking for usage when ask (clientAsked: it asked already, and nothing was added). It is
// body itself when nothing changes. modelAt is where the model member lies in out.
func (v *bodyView) rewrite(body []byte, ask bool) (out []byte, modelAt span, clientAsked bool) {
	var e rawjson.Edits
	if v.options != nil {
		e.Replace(v.cut.from, v.cut.to, "")
	}
	if ask {
		clientAsked = usage.Ask(&e, body, v.usage)
	}
	from := e.Moved(v.model.from)
	return e.Apply(body), span{from, from + v.model.to - v.model.from}, clientAsked
}

var errNoModelMember = errors.New("request body has no model member to replace")

// withModel returns body with its model member, at, replaced by "model": model, and where the
// new member lies. The model member is the only one of that name in any spelling (see
// parseInference), so a target that matches names case-insensitively reads this one.
func withModel(body []byte, at span, model string) ([]byte, span, error) {
	if at.to <= at.from || at.to > len(body) {
		return nil, span{}, errNoModelMember
	}
	q, _ := json.Marshal(model) // a Go string always encodes
	text := `"model":` + string(q)
	var e rawjson.Edits
	e.Replace(at.from, at.to, text)
	return e.Apply(body), span{at.from, at.from + len(text)}, nil
}
