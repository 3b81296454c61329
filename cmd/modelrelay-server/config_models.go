package main

import (
	"fmt"
	"slices"
)

// ModelConfig is one model's entry in the `models:` section: what the relay should know of a
// model that its name does not tell.
type ModelConfig struct {
	// Reasoning marks a reasoning model: a Responses call's reasoning.effort reaches it as
	// reasoning_effort. Other models never get the parameter (most servers refuse it).
	Reasoning bool
}

// modelKeys are the keys of one model's entry.
var modelKeys = []string{"reasoning"}

// decodeModels reads the `models:` mapping, model name -> settings. Problems name
// models.<model>.<key>.
func decodeModels(d *decoder, v any) map[string]ModelConfig {
	m, ok := v.(map[string]any)
	if v != nil && !ok {
		d.fail("models", "must be a mapping (model: {reasoning: true})")
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]ModelConfig, len(m))
	for _, model := range sortedKeys(m) {
		e, ok := m[model].(map[string]any)
		if !ok {
			d.fail("models."+model, "must be a mapping (reasoning: true)")
			continue
		}
		prefix := "models." + model + "."
		md := &decoder{get: func(key string) any { return e[key[len(prefix):]] }, p: d.p}
		out[model] = ModelConfig{Reasoning: md.boolean(prefix + "reasoning")}
	}
	return out
}

// modelWarnings are the unknown keys of the `models:` section's entries.
func modelWarnings(m map[string]any, warn func(name, key string, known []string)) {
	models, _ := m["models"].(map[string]any)
	for _, model := range sortedKeys(models) {
		e, _ := models[model].(map[string]any)
		for _, key := range sortedKeys(e) {
			if !slices.Contains(modelKeys, key) {
				warn(fmt.Sprintf("models.%s.%s", model, key), key, modelKeys)
			}
		}
	}
}
