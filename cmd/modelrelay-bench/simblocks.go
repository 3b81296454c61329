package main

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"strings"
	"sync"
)

// The simulated replica's KV cache: which prompt prefixes it has computed, in blocks.

// simBlockBytes is the cache's block size: 256 bytes of canonical prompt, about 64 tokens,
// the same unit the relay's prefix index hashes in (relay/prefix).
const simBlockBytes = 256

// simMessage is the part of a chat message the cache looks at. Content is a string or an
// array of parts; only the parts' text counts.
type simMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// canonicalPrompt is every message's role and text, concatenated in order, with the tools
// (compact JSON) after the leading system messages, where chat templates put tool
// definitions. Two requests share a cached prefix exactly when their canonical prompts share
// a byte prefix.
func canonicalPrompt(tools json.RawMessage, messages []simMessage) string {
	var b strings.Builder
	i := 0
	for ; i < len(messages) && messages[i].Role == "system"; i++ {
		b.WriteString(messages[i].Role)
		b.WriteString(messageText(messages[i].Content))
	}
	var compact bytes.Buffer
	if json.Compact(&compact, tools) == nil && compact.String() != "null" {
		b.WriteString("tools")
		b.Write(compact.Bytes())
	}
	for ; i < len(messages); i++ {
		b.WriteString(messages[i].Role)
		b.WriteString(messageText(messages[i].Content))
	}
	return b.String()
}

func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// blockKeys hashes text's full blocks. Each key covers its block and, through the previous
// key, everything before it: equal keys mean equal prefixes, as in vLLM's prefix cache. A
// trailing partial block has no key (it is never cached).
func blockKeys(text string) []uint64 {
	keys := make([]uint64, 0, len(text)/simBlockBytes)
	var prev [8]byte
	for off := 0; off+simBlockBytes <= len(text); off += simBlockBytes {
		h := fnv.New64a()
		h.Write(prev[:])
		h.Write([]byte(text[off : off+simBlockBytes]))
		k := h.Sum64()
		keys = append(keys, k)
		binary.LittleEndian.PutUint64(prev[:], k)
	}
	return keys
}

// prefixLRU is a bounded set of computed blocks, least recently used evicted first.
type prefixLRU struct {
	mu       sync.Mutex
	capacity int
	order    *list.List // of uint64, most recent at the front
	blocks   map[uint64]*list.Element
}

func newPrefixLRU(capacity int) *prefixLRU {
	return &prefixLRU{capacity: max(1, capacity), order: list.New(), blocks: make(map[uint64]*list.Element)}
}

// admit returns how many leading blocks of keys were cached, then marks all of them computed.
// Only a leading run counts: a block's KV is useless without its whole prefix. Keys are
// touched last to first, so a prefix's first blocks are the most recent and eviction trims
// conversations from the tail (vLLM's eviction order), never leaving a hole in a prefix.
func (c *prefixLRU) admit(keys []uint64) (hits int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for hits < len(keys) && c.blocks[keys[hits]] != nil {
		hits++
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if e := c.blocks[keys[i]]; e != nil {
			c.order.MoveToFront(e)
			continue
		}
		c.blocks[keys[i]] = c.order.PushFront(keys[i])
		for c.order.Len() > c.capacity {
			oldest := c.order.Back()
			c.order.Remove(oldest)
			delete(c.blocks, oldest.Value.(uint64))
		}
	}
	return hits
}

// Len is the number of blocks held.
func (c *prefixLRU) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
