package usage

import "strings"

// sample is an answer as a model server sends it, byte for byte, and what a tap makes of it.
type sample struct {
	name  string
	mode  Mode // JSON, or Stream (then it is run in StreamStrip mode too)
	body  string
	want  Counts
	strip string // StreamStrip's output; "" means the body unchanged
}

const openAIStream = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"! Set \"usage\": {\"prompt_tokens\": 1} here."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

`

const openAIUsageChunk = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

`

const done = "data: [DONE]\n\n"

const vllmStream = `data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0}}

data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":13,"completion_tokens":1}}

data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}}

data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}}

data: [DONE]

`

const vllmStripped = `data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-7f3c","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}

data: [DONE]

`

const llamaStream = `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"timings":{"prompt_n":9,"prompt_ms":12.5,"prompt_per_token_ms":1.38,"prompt_per_second":720.0,"predicted_n":2,"predicted_ms":20.1,"predicted_per_token_ms":10.05,"predicted_per_second":99.5}}

data: [DONE]

`

const llamaStripped = `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1735000000,"id":"chatcmpl-Qm2","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk","timings":{"prompt_n":9,"prompt_ms":12.5,"prompt_per_token_ms":1.38,"prompt_per_second":720.0,"predicted_n":2,"predicted_ms":20.1,"predicted_per_token_ms":10.05,"predicted_per_second":99.5}}

data: [DONE]

`

const ollamaChunks = `data: {"id":"chatcmpl-417","object":"chat.completion.chunk","created":1739000000,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}

data: {"id":"chatcmpl-417","object":"chat.completion.chunk","created":1739000000,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}

`

const ollamaUsage = `data: {"id":"chatcmpl-417","object":"chat.completion.chunk","created":1739000000,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":26,"completion_tokens":8,"total_tokens":34}}

`

const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1200,"cache_read_input_tokens":3400,"cache_creation":{"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`

// anthropicStreamFullDelta is the newer message_delta, carrying the input members too (here
// without the cache ones: message_start's stay).
const anthropicStreamFullDelta = `event: message_start
data: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-opus-4-1","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":2000,"output_tokens":4}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":5,"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}

`

const responsesStream = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"in_progress","output":[],"usage":null,"metadata":{}}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf37fc","output_index":0,"content_index":0,"delta":"Hi"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c9fdcf37fc","output_index":0,"content_index":0,"delta":" there!"}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec","object":"response","created_at":1741290958,"status":"completed","error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_67c9fdcf37fc","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48},"user":null,"metadata":{}}}

`

// chatJSON is pretty-printed, as OpenAI writes its answers.
const chatJSON = `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "Hello! How can I assist you today?",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": {
      "cached_tokens": 0,
      "audio_tokens": 0
    },
    "completion_tokens_details": {
      "reasoning_tokens": 0,
      "audio_tokens": 0,
      "accepted_prediction_tokens": 0,
      "rejected_prediction_tokens": 0
    }
  },
  "service_tier": "default"
}
`

const anthropicJSON = `{"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hi! My name is Claude."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":2051,"cache_read_input_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2051,"ephemeral_1h_input_tokens":0},"output_tokens":503,"service_tier":"standard"}}`

const embeddingsJSON = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292,-0.0028842222]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`

const responsesJSON = `{"id":"resp_67ccd2bed1ec8190b14f964abc054267","object":"response","created_at":1741476542,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[{"type":"message","id":"msg_67ccd2bf17f0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"In a peaceful grove beneath a silver moon...","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123},"user":null,"metadata":{}}`

// quotedJSON holds the text of a usage member inside a string, after the real one and before.
const quotedJSON = `{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Write \"usage\": {\"prompt_tokens\": 999, \"completion_tokens\": 999} in the file."},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":17,"total_tokens":48},"note":"and \"usage\":{\"prompt_tokens\":7} again, and a key \\\"usage\\\": {}"}`

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

var samples = []sample{
	{name: "openai include_usage", mode: Stream, body: openAIStream + openAIUsageChunk + done,
		want: Counts{19, 10, true}, strip: openAIStream + done},
	{name: "openai no usage", mode: Stream, body: openAIStream + done},
	{name: "openai crlf", mode: Stream, body: crlf(openAIStream + openAIUsageChunk + done),
		want: Counts{19, 10, true}, strip: crlf(openAIStream + done)},
	{name: "openai mixed line ends", mode: Stream,
		body: strings.Replace(openAIStream, "\n\n", "\r\n\n", 2) + strings.Replace(openAIUsageChunk, "\n\n", "\n\r\n", 1) + done,
		want: Counts{19, 10, true}, strip: strings.Replace(openAIStream, "\n\n", "\r\n\n", 2) + done},
	{name: "openai keep-alive and unterminated end", mode: Stream,
		body: ": keep-alive\n\n" + openAIStream + ": ping\n\n" + strings.TrimSuffix(openAIUsageChunk, "\n\n"),
		want: Counts{19, 10, true}, strip: ": keep-alive\n\n" + openAIStream + ": ping\n\n"},
	{name: "vllm continuous usage", mode: Stream, body: vllmStream, want: Counts{12, 2, true}, strip: vllmStripped},
	{name: "llama-server", mode: Stream, body: llamaStream, want: Counts{9, 2, true}, strip: llamaStripped},
	{name: "ollama", mode: Stream, body: ollamaChunks + ollamaUsage + done, want: Counts{26, 8, true},
		strip: ollamaChunks + done},
	{name: "anthropic", mode: Stream, body: anthropicStream, want: Counts{25 + 1200 + 3400, 15, true}},
	{name: "anthropic crlf", mode: Stream, body: crlf(anthropicStream), want: Counts{25 + 1200 + 3400, 15, true}},
	{name: "anthropic full delta", mode: Stream, body: anthropicStreamFullDelta, want: Counts{5 + 2000, 42, true}},
	{name: "responses", mode: Stream, body: responsesStream, want: Counts{37, 11, true}},
	{name: "multi-line data", mode: Stream,
		body:  "id: 7\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{}}],\ndata:  \"usage\": {\"prompt_tokens\": 3,\n: a comment\ndata: \"completion_tokens\": 4}}\n\n" + done,
		want:  Counts{3, 4, true},
		strip: "id: 7\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{}}]}\n: a comment\n\n" + done},
	{name: "stream usage null", mode: Stream, body: "data: {\"choices\":[],\"usage\":null}\n\n" + done},
	{name: "stream not json", mode: Stream, body: "data: {\"usage\":{\"prompt_tokens\":1}\n\ndata: \"usage\"\n\n"},
	{name: "chat completion", mode: JSON, body: chatJSON, want: Counts{19, 10, true}},
	{name: "anthropic message", mode: JSON, body: anthropicJSON, want: Counts{2095 + 2051 + 10, 503, true}},
	{name: "embeddings", mode: JSON, body: embeddingsJSON, want: Counts{8, 0, true}},
	{name: "responses json", mode: JSON, body: responsesJSON, want: Counts{36, 87, true}},
	{name: "count_tokens", mode: JSON, body: `{"input_tokens":2095}`},
	{name: "no usage", mode: JSON, body: `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`},
	{name: "usage null", mode: JSON, body: `{"id":"x","choices":[],"usage": null}`},
	{name: "usage in a string", mode: JSON, body: quotedJSON, want: Counts{31, 17, true}},
	{name: "usage cut off", mode: JSON, body: `{"id":"x","usage":{"prompt_tokens":5,"completion_tokens":`},
	{name: "bad numbers", mode: JSON, body: `{"usage":{"prompt_tokens":-5,"input_tokens":3,"completion_tokens":2.5,"output_tokens":"7","cache_read_input_tokens":99999999999999999999}}`,
		want: Counts{3, 0, true}},
	{name: "empty", mode: JSON, body: ``},
}
