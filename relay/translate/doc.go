// Package translate maps between the two API families a relay client may speak and a target
// may serve: Anthropic Messages and OpenAI Chat Completions. It is pure: bytes in, bytes out,
// no I/O, nothing of the relay's own.
//
// The surface:
//
//   - AnthropicToOpenAI and OpenAIToAnthropic map a request body; Request says what the mapped
//     call needs (streaming, whether the client asked for a usage chunk). They walk the body
//     where it lies instead of decoding it (jsonwalk.go), so a mapping costs its output and
//     little more; a request of more than MaxItems messages, content blocks and tools fails
//     with ErrTooLarge, any other they cannot map with ErrInvalid.
//   - OpenAIResponseToAnthropic and AnthropicResponseToOpenAI map a complete JSON answer.
//   - ErrorBody re-shapes a target's error answer into the client's family (the status is kept
//     by the caller).
//   - NewAnthropicStream (OpenAI chunks in, Anthropic events out) and NewOpenAIStream (the
//     reverse) translate a server-sent-event stream as its bytes arrive, chunk by chunk, with
//     bounded memory: Write takes whatever the target sent, returns what to send the client.
//   - TokenizeRequest, TokenizeCount and EstimateTokens serve /v1/messages/count_tokens on a
//     target that only speaks OpenAI.
//   - The Responses API (/v1/responses, Codex CLI's only API) on a chat target: ResponsesToChat
//     maps the request (an assistant turn's text, reasoning and calls become one message),
//     ChatResponseToResponses a whole answer, ResponsesStream the stream in OpenAI's event
//     order, ResponsesErrorBody an error; Chain puts NewOpenAIStream before ResponsesStream
//     for a target that speaks only Anthropic Messages. Reasoning goes back to the client as
//     a self-contained token (encrypted_content) that the next request's mapping reads back,
//     so no node keeps state for it; ConversationItems (what to store of a response) and
//     WithHistory (a previous_response_id expanded) serve the relay's store of responses.
//
// Fields with no counterpart are dropped from translated requests (unknown ones too); the
// table in docs/translation.md lists them.
package translate
