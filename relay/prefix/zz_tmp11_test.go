package prefix

import (
	"strings"
	"testing"
)

func BenchmarkTmpTiny(b *testing.B) {
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 99) + `{"role":"user","content":"hi"}]}`)
	var p Parser
	var dst Prompt
	b.Run("100msgs", func(b *testing.B) {
		for b.Loop() {
			p.Parse(body, &dst)
		}
	})
	skipOnly := func() {
		r := reader{b: body}
		r.skip()
	}
	b.Run("skip", func(b *testing.B) {
		for b.Loop() {
			skipOnly()
		}
	})
	b.Run("iterate", func(b *testing.B) {
		for b.Loop() {
			r := reader{b: body}
			r.enter('{')
			for r.next('}') {
				if string(r.key()) != "messages" {
					r.skip()
					continue
				}
				r.enter('[')
				for r.next(']') {
					r.enter('{')
					for r.next('}') {
						r.key()
						r.skip()
					}
				}
			}
		}
	})
}
