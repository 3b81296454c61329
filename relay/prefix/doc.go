// Package prefix hashes the prompt of an LLM request into chained blocks and remembers, per
// target, which blocks each target recently served, so that placement can send a request to
// the replica whose KV cache already holds the longest part of its prompt. It also keeps the
// session-to-target table of session affinity. It is pure: no I/O, nothing of the relay's own.
//
// The surface:
//
//   - Parser.Parse reads a request body of either dialect (OpenAI chat completions,
//     completions or responses; Anthropic messages) into a Prompt: the block hashes of its
//     canonical text and its session key. It reads the body in one pass, decoding only the
//     text it hashes, and allocates nothing once warm but the session key's string.
//     ParseTop does the same for a body whose top level the caller has read already (Top,
//     filled as it read), without walking the top level again.
//   - Index is the bounded per-target recency set of block hashes: Record what a target
//     served, Match how many leading blocks of a prompt it holds, Forget a target that left.
//   - Sessions maps a session key to the target that served it last, for a while.
//
// # Canonical prompt text
//
// The blocks are hashed over a canonical text rather than over the body, so that the same
// conversation gives the same blocks whichever dialect it is sent in, whatever the order of
// the body's fields and its whitespace, and wherever Anthropic's cache_control markers sit.
// The text is, in order:
//
//  1. the system prompt: Anthropic's system (a string or text blocks), the responses API's
//     instructions, then the leading system and developer messages (or input items);
//  2. the tools (tools, or the legacy functions): one tool record each;
//  3. the messages (or input items, or a completions prompt), in order.
//
// It is made of records, each starting with the byte 0x1E and a letter:
//
//	0x1E role  text               a run of text: role is 's' (system or developer), 'u' (user)
//	                              or 'a' (assistant). Consecutive texts of one role, in one
//	                              message or in neighbouring ones, are one run joined by "\n\n":
//	                              a tag is written only when the role changes.
//	0x1E 't' name 0x1F description 0x1F schema
//	                              a tool; schema is the canonical JSON of OpenAI's parameters
//	                              or Anthropic's input_schema ({"type":"object","properties":{}}
//	                              when absent). Server tools (a type other than function or
//	                              custom) are left out: no model server runs them.
//	0x1E 'c' name 0x1F arguments  a tool call: OpenAI tool_calls and function_call, the
//	                              responses API's function_call, Anthropic's tool_use; the
//	                              arguments (a JSON string in OpenAI's dialects, the input
//	                              object in Anthropic's) as canonical JSON, "{}" when empty.
//	0x1E 'r' text                 a tool result: an OpenAI tool message, a function_call_output,
//	                              an Anthropic tool_result ("Error: " first when is_error); its
//	                              text parts are joined by "\n".
//
// Canonical JSON is compact, keeps members in the order sent and numbers as sent, and
// writes strings unescaped but for '"' and '\' (escaped again): `{"a": "\u00fc\/"}` and
// `{"a":"ü/"}` are the same text, and so are an OpenAI arguments string and the Anthropic
// input object it stands for. It is hashed, never sent: it need not be valid JSON.
//
// Inside a run of text or a tool result, media is a short stable marker, never its bytes:
// 0x1F 'i' and the 8 bytes (little-endian) of the xxhash64 of an image's URL (an Anthropic
// base64 source counts as its data: URL, as the translation writes it), and 0x1F 'x' and
// the xxhash64 of any other part's JSON as sent (its source's when it has one, so that
// cache_control moving from turn to turn does not change it). Thinking blocks and
// reasoning items are left out: they have no counterpart across dialects. Message and tool
// ids are left out too. Text is taken as sent (after JSON unescaping), with no Unicode or
// whitespace normalisation. Member names are matched as sent: one spelled with escapes
// ("r\u006fle") is not recognised.
//
// These choices mirror relay/translate, so that a request and its translation hash alike.
// One exception: a system message in the middle of an OpenAI conversation stays in place here
// (a later system message must not change the blocks of what came before it), where the
// translation to Anthropic moves it into system.
//
// # Blocks
//
// The canonical text is cut into blocks of BlockSize bytes; only full blocks are hashed, at
// most MaxBlocks of them. Block i's hash is the xxhash64 of the text's first
// (i+1)*BlockSize bytes (computed in one pass: a running digest summed at each block's end),
// so a block's hash stands for the whole prefix up to its end: holding block i means having
// seen blocks 0..i. A conversation's next turn extends its canonical text, so it shares
// every full block of the previous turn's prompt.
package prefix
