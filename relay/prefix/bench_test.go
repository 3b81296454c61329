package prefix

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// benchBody returns a body of about size bytes in the dialect: a system prompt, two tools
// and a tool-using conversation. Its texts are prose (sentences, paragraphs, a quotation now
// and then: an escape every 100 bytes or so) and its tool results source code (an escape
// every 10 bytes or so); or everything is prose, or code, when style says so.
func benchBody(dialect string, size int, style ...string) []byte {
	text, result := benchProse, benchCode
	if len(style) > 0 && style[0] == "code" {
		text = benchCode
	}
	if len(style) > 0 && style[0] == "prose" {
		result = benchProse
	}
	for rounds := 1; ; rounds++ {
		c := agentConvOf(42, rounds, size/8, text, result)
		b := c.openAI()
		if dialect == "anthropic" {
			b = c.anthropic()
		}
		if len(b) >= size {
			return b
		}
	}
}

var (
	proseWords = strings.Fields(`the a of to and in that is for on with as it be this by are or from at an
not have you we can will should would which when where then file function return value error
request model server block cache target conversation message answer question system user tool`)
	codeLines = []string{
		"\tif err := s.dial(ctx, \"tcp\", addr); err != nil {",
		"\t\treturn fmt.Errorf(\"dial %s: %w\", addr, err)",
		"\t}",
		"\tfor i, b := range s.blocks[:n] {",
		"\t\tm[b] = struct{}{} // \"seen\"",
		"func (p *Pool) Pick(load []int) (int, bool) {",
		"\tconst name = \"modelrelay\"",
		"}",
		"",
	}
)

// benchProse is text as people and models write it.
func benchProse(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	for sentence := 1; b.Len() < n; sentence++ {
		for w := range 8 + r.IntN(14) {
			if w > 0 {
				b.WriteByte(' ')
			}
			if r.IntN(60) == 0 {
				b.WriteString(`"` + proseWords[r.IntN(len(proseWords))] + `"`)
				continue
			}
			b.WriteString(proseWords[r.IntN(len(proseWords))])
		}
		b.WriteByte('.')
		if sentence%5 == 0 {
			b.WriteString("\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// benchCode is source code, as tool results carry it.
func benchCode(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 9))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(codeLines[r.IntN(len(codeLines))])
		b.WriteByte('\n')
	}
	return b.String()
}

// BenchmarkParse is the cost of reading a prompt's blocks from a body, per body size.
func BenchmarkParse(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, dialect := range []string{"openai", "anthropic"} {
			body := benchBody(dialect, size)
			b.Run(fmt.Sprintf("%s/%dKB", dialect, size>>10), func(b *testing.B) {
				var p Parser
				var dst Prompt
				p.Parse(body, &dst)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					p.Parse(body, &dst)
				}
				b.ReportMetric(float64(len(dst.Blocks)), "blocks")
			})
		}
	}
	// Prose all through, and source code all through: the worst case, an escape every 20
	// bytes or so.
	for _, style := range []string{"prose", "code"} {
		body := benchBody("openai", 4<<10, style)
		b.Run("openai/4KB-"+style, func(b *testing.B) {
			var p Parser
			var dst Prompt
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				p.Parse(body, &dst)
			}
		})
	}
}

func fullPrompt() []uint64 {
	var p Parser
	var dst Prompt
	p.Parse(benchBody("openai", 128<<10), &dst)
	if len(dst.Blocks) != MaxBlocks {
		panic("bench prompt too short")
	}
	return dst.Blocks
}

// BenchmarkMatch is one target's match of a MaxBlocks prompt, which it holds in full or in
// half, among 64 Ki remembered entries.
func BenchmarkMatch(b *testing.B) {
	blocks := fullPrompt()
	x := NewIndex(64 << 10)
	for i := range uint64(200) {
		x.Record(1, randomBlocks(i, 256))
	}
	x.Record(1, blocks[:MaxBlocks/2])
	b.Run("half", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if x.Match(1, blocks) != MaxBlocks/2 {
				b.Fatal("wrong match")
			}
		}
	})
	x.Record(1, blocks)
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Match(1, blocks)
		}
	})
	b.Run("none", func(b *testing.B) {
		other := randomBlocks(999, MaxBlocks)
		b.ReportAllocs()
		for b.Loop() {
			x.Match(1, other)
		}
	})
}

// BenchmarkRecord is a target recording the next turn of a conversation it already holds
// (16 new blocks after 240 known), and a prompt it has never seen.
func BenchmarkRecord(b *testing.B) {
	blocks := fullPrompt()
	x := NewIndex(64 << 10)
	x.Record(1, blocks[:240])
	b.Run("next-turn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Record(1, blocks)
		}
	})
	b.Run("new-prompt", func(b *testing.B) {
		prompts := make([][]uint64, 1024)
		for i := range prompts {
			prompts[i] = randomBlocks(uint64(i)+1e6, MaxBlocks)
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			x.Record(2, prompts[i%len(prompts)])
			i++
		}
	})
}

func BenchmarkSessions(b *testing.B) {
	s := NewSessions(5*time.Minute, 100_000)
	now := time.Now()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user_%064d_session_%d", i, i)
		s.Set(keys[i], uint64(i), now)
	}
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Get(keys[i%len(keys)], now)
			i++
		}
	})
	b.Run("set", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Set(keys[i%len(keys)], uint64(i), now)
			i++
		}
	})
}
