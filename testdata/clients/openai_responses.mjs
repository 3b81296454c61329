// The official OpenAI SDK's Responses API, unchanged, against the relay (RELAY_URL) whose
// target speaks only chat completions (or, with FAMILY=anthropic, only Anthropic Messages). Each check throws on a wrong answer; the last line
// printed is a JSON summary the Go test reads. Run by cmd/modelrelay-server/responses_e2e_test.go.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.RELAY_URL + "/v1", apiKey: "sk-test", maxRetries: 0 });
const model = process.env.MODEL;
const hello = `Hello from the ${process.env.FAMILY ?? "openai"}-only fake.`;
const summary = {};

// A plain answer, stored (the default).
const plain = await client.responses.create({ model, instructions: "Be brief.", input: "Say hello." });
assert.equal(plain.object, "response");
assert.equal(plain.status, "completed");
assert.equal(plain.model, model);
assert.match(plain.id, /^resp_/);
assert.equal(plain.output_text, hello);
assert.equal(plain.instructions, "Be brief.");
assert.ok(plain.usage.input_tokens > 0 && plain.usage.output_tokens > 0, JSON.stringify(plain.usage));
summary.plain = plain.output_text;

// Read back, continued, deleted.
const got = await client.responses.retrieve(plain.id);
assert.equal(got.id, plain.id);
assert.equal(got.output_text, plain.output_text);
const next = await client.responses.create({ model, previous_response_id: plain.id, input: "And again?" });
assert.equal(next.status, "completed");
assert.equal(next.previous_response_id, plain.id);
const deleted = await client.responses.delete(plain.id);
summary.deleted = deleted === undefined ? "ok" : JSON.stringify(deleted);
try {
  await client.responses.retrieve(plain.id);
  assert.fail("a deleted response was found");
} catch (e) {
  assert.ok(e instanceof OpenAI.NotFoundError, String(e));
}
try {
  await client.responses.create({ model, previous_response_id: "resp_doesnotexist000000000000", input: "Hi" });
  assert.fail("an unknown previous_response_id was accepted");
} catch (e) {
  assert.ok(e instanceof OpenAI.NotFoundError, String(e));
  assert.equal(e.code, "previous_response_not_found");
}

// A function tool, streamed with responses.stream: the call comes whole, with its arguments.
const tools = [{ type: "function", name: "get_weather", description: "Current weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] } }];
const stream = client.responses.stream({ model, tools, input: "What is the weather in Paris?" });
const kinds = new Set();
let lastSeq = -1, argDeltas = "";
for await (const ev of stream) {
  kinds.add(ev.type);
  assert.ok(ev.sequence_number > lastSeq, `sequence ${ev.sequence_number} after ${lastSeq}`);
  lastSeq = ev.sequence_number;
  if (ev.type === "response.function_call_arguments.delta") argDeltas += ev.delta;
}
const final = await stream.finalResponse();
const call = final.output.find((o) => o.type === "function_call");
assert.ok(call, JSON.stringify(final.output));
assert.equal(call.name, "get_weather");
assert.deepEqual(JSON.parse(call.arguments), { city: "Paris", unit: "celsius" });
assert.equal(argDeltas, call.arguments);
for (const k of ["response.created", "response.in_progress", "response.output_item.added",
  "response.function_call_arguments.done", "response.output_item.done", "response.completed"]) {
  assert.ok(kinds.has(k), `no ${k} in ${[...kinds]}`);
}
summary.toolCall = call.arguments;

// The tool's output sent back, not stored: the model's text answer.
const answer = await client.responses.create({ model, tools, store: false, input: [
  { role: "user", content: "What is the weather in Paris?" },
  { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
  { type: "function_call_output", call_id: call.call_id, output: "18 degrees and sunny" }] });
assert.equal(answer.output_text, "The tool said: 18 degrees and sunny");
summary.toolAnswer = answer.output_text;

// Streamed text.
const textStream = client.responses.stream({ model, input: "Say hello." });
let text = "";
for await (const ev of textStream) if (ev.type === "response.output_text.delta") text += ev.delta;
assert.equal(text, hello);

// An error from the target, in the Responses error shape with the status kept.
try {
  await client.responses.create({ model, input: "error please" });
  assert.fail("no error");
} catch (e) {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.error.message, "the fake refuses: error please");
  summary.error = e.error.message;
}

console.log(JSON.stringify(summary));
