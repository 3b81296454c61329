// Package usage accounts the tokens each answer of a model server used (per API key, and for
// the OpenTelemetry GenAI metrics), by watching the answer's bytes as they pass from the
// model server to the client. It never buffers an answer: a stream goes on chunk by chunk as
// it arrives. It is pure: bytes in, counts out, no I/O, nothing of the relay's own.
//
// The surface:
//
//   - Tap follows one answer: Reset with its Mode, Write every piece as it arrives (what it
//     returns goes to the client), Close at the end, then Counts.
//   - AskForUsage makes an OpenAI streaming request ask for the usage chunk, and says whether
//     the client had asked: if not, the answer goes through a StreamStrip tap, which removes
//     what the client did not ask for.
//
// # Usage objects
//
// A usage object's members that count are OpenAI's prompt_tokens and completion_tokens,
// and input_tokens and output_tokens (Anthropic, the OpenAI Responses API), plus Anthropic's
// cache_creation_input_tokens and cache_read_input_tokens, which count as input: Anthropic's
// input_tokens excludes cached tokens, while OpenAI's prompt_tokens and the Responses API's
// input_tokens include them (reporting them again only in *_details objects, ignored here).
// Input is prompt_tokens if reported, else the sum of the input_tokens and cache members
// reported; Output is completion_tokens if reported, else output_tokens. A count is a plain
// non-negative JSON integer that fits an int64; anything else is ignored. "usage": null is
// not a report. When an answer reports usage more than once (streams), each member a later
// object carries replaces the earlier value of that member: Anthropic's message_delta
// carries the cumulative output_tokens (sometimes the input members too) after
// message_start's message.usage; vLLM's continuous usage stats carry a cumulative usage in
// every chunk. The last report wins.
//
// # JSON answers
//
// A non-streamed answer (chat completions, completions, embeddings, responses, Anthropic
// messages, count_tokens) reports usage in its top-level usage member. Every real server
// writes that member at or near the end of the body (OpenAI, vLLM and llama.cpp after
// choices or data, Anthropic last, the Responses API before only user and metadata), so the
// tap keeps only the last 16 KiB of the body, in a ring, and at Close reads the object after
// the last `"usage"` followed by a colon there: in JSON text an unescaped "usage" followed by
// a colon can only be a member name (inside a string its quotes are escaped). If that value
// is not an object, or the object is cut off, there is no report. A body shorter than 16 KiB
// is simply kept whole. (Anthropic's count_tokens answer has no usage member: counting is
// not using, Seen stays false.)
//
// # Streams
//
// A server-sent-events stream is split into events at blank lines (\n\n, \r\n\r\n and mixed
// \r\n/\n line ends; a lone \r is not a line end). An event's data is its data lines'
// values joined with \n, one space after the colon removed; comments and other fields are
// not data. Only an event whose bytes contain `"usage"` is parsed, so that every other
// event costs a scan for its boundary and for that substring, and nothing else: no copy, no
// allocation, unless an event is cut between two Writes, when the part that arrived is
// copied until the rest comes. (Nor is one whose every "usage" is followed by a colon and
// null: OpenAI writes "usage":null in every chunk once usage is asked for.) A parsed
// event's data must be a JSON object (data: [DONE] is not); its usage is read at top level
// (OpenAI chunks, Anthropic's message_delta), in message (Anthropic's message_start) and in
// response (the Responses API's response.completed, response.incomplete and
// response.failed). The final event of a stream that ends without a blank line is read at
// Close. A usage member is known by its name as written: "us\u0061ge", which no server
// writes, is not one.
//
// In StreamStrip mode the tap also removes what the client did not ask for: an event whose
// JSON has "choices": [] and a top-level usage that is not null (OpenAI's usage chunk) is
// dropped, after it is counted; a chunk with choices in an array that is not empty and a
// usage that is not null (llama.cpp's last chunk, vLLM's continuous usage stats) loses that
// member: only its data is rewritten, the usage member and its separator removed, other
// fields and comments kept. Everything else (comments, data: [DONE], "usage": null in
// ordinary chunks, events without a choices array) passes on byte for byte, in order. Write
// passes on every complete event at once and holds back only an incomplete last one.
//
// # Bounds
//
// An event is parsed, held and edited only when it is at most 64 KiB long. A longer one is
// passed on as it arrives, not held, never edited, and only its last 16 KiB are kept and
// read like a JSON answer's end (so a long response.completed still counts). The tap's
// buffers are bounded accordingly: the held event and an event's joined data at 64 KiB, the
// ring at 16 KiB, an edited event at 128 KiB; the StreamStrip output buffer holds one Write's
// output, and Reset lets go of it past 256 KiB. Nothing depends on how an answer is cut
// into Writes: the counts and the bytes passed on are the same for every cut.
package usage
