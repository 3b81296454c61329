package main

import "time"

// docScenario is the regime the published 2× figures of prefix-aware routers come from:
// replicas that are prefill-bound and close to saturation, arrivals that do not wait for the
// replicas, and long per-conversation histories next to little new content per turn. It
// models chat over a long document (a contract, a paper, an incident log pasted or uploaded
// at the first turn, then short questions about it); RAG that re-sends a long retrieved
// context every turn and coding agents that re-send the files they have opened look the same
// to a replica. Not in the default run (about two minutes for both policies): select it
// with -workloads doc. None of its values was tuned on cache_aware's results.
//
// The replica is agent's, unchanged (agentScenario gives the reasons for each cost): a
// 70B-class model on an eight-GPU node, 4 ms of prefill per 256-byte block (~16k tokens/s),
// 20 ms per output token, chunked prefill of 32 blocks, 4096 blocks of KV cache for this
// benchmark's conversations, max_concurrent 32.
//
// The sessions: a 2 KB system prompt every conversation shares, then a document of its own,
// 16–32 KB (4–8k tokens, 10–20 pages), before the first question. Questions are 128–512
// bytes, answers 64 tokens (~320 bytes: a sentence or two and a quote). A turn adds
// ~0.5–0.8 KB to a history of 18–40 KB: a replica that holds the conversation prefills ~2
// blocks of a turn, one that does not prefills all ~100 (~0.4 s). The prompts stay under the
// 64 KB the relay's prefix index hashes.
//
// The load, open loop: each turn is due 2.5–7.5 s (mean 5 s) after the previous one's due
// time, whatever the replicas do, and is sent then or once the previous answer is complete
// (its prompt contains it), whichever is later; conversations start 300 ms apart with
// jitter, so their turns interleave at random (fixed by the seed). A person reads an answer
// and types a question in more like 10–60 s: the clock is compressed so 64 conversations
// offer the load of many more users. That favours least_load if anything, since more users
// would bring more documents for the same KV cache. The gap is still about twice an answer
// (~1.3 s of decode plus TTFT), so most turns go out at their due time. The rate was set
// against least_load alone: at its own hit ratio (~50%) its prefill takes ~85% of the
// replicas' capacity over the schedule's busiest 5 s (~50% over the whole arrival period,
// which ramps up and down), a load it sustains; a 4 s gap with starts 400 ms apart gave 78%
// and held a quarter of the turns for their previous answer. The schedule alone takes ~60 s,
// so the total time cannot show what cache_aware saves; the offered load column does: at the
// same arrival rate it is what each policy asks of the replicas.
func docScenario() placementScenario {
	sim := agentScenario().sim
	return placementScenario{name: "doc", title: "70B-class replicas near prefill saturation, open-loop chat over long documents",
		sim: sim, maxConcurrent: 32,
		shape: placementShape{Conversations: 64, Turns: 8, SystemBytes: 2048, DocMin: 16384, DocMax: 32768, UserMin: 128, UserMax: 512,
			Intro:   "You are a document assistant. Answer questions about the document the user provides, quoting it. ",
			DocLead: "Here is the document we will discuss.\n\n",
			Stagger: 300 * time.Millisecond, OpenLoop: true, Pause: 5 * time.Second, MaxTokens: sim.MaxTokens, Model: sim.Model}}
}

// rushScenario is doc's sessions when the replicas cannot keep up: the measure is how long
// the same 512 turns take to serve, the throughput the published routers report. It is a
// closed loop: each turn goes out 0.5–1.5 s after the previous answer is complete (an agent
// runs the tool it asked for; a person on doc's compressed clock reads the answer), and the
// 64 conversations start 100 ms apart. The schedule alone asks for ~21 turns/s. least_load,
// at its own ~50% hit ratio, serves ~12: its replicas prefill ~70% of its run and over 100%
// at its busiest, and every decode step that finds prefill queued carries a chunk of it, so
// least_load sets its own pace. cache_aware prefills about a quarter as much and ends within
// ~2 s of the schedule. Not in the default run (about 80 seconds for both policies): select
// it with -workloads rush. None of its values was tuned on cache_aware's results. The think
// time is doc's schedule compressed as far as a closed loop allows without turns following
// their answers at once: then least_load keeps a conversation on the replica that just
// answered it, which has just become the least loaded, and both policies look the same.
//
// The relay runs with its default affinity_slack, a quarter of max_concurrent: 8 here. With
// 16 conversations per replica, in-flight counts differ by more than 2 much of the time, so a
// slack of 2 (-rush.affinity-slack 2) moves about a third of the turns away from the replica
// holding their history, and each move prefills the whole document again.
func rushScenario() placementScenario {
	sc := docScenario()
	sc.name, sc.title = "rush", "70B-class replicas past least_load's prefill capacity, closed-loop chat over long documents"
	sc.shape.OpenLoop, sc.shape.Stagger, sc.shape.Pause = false, 100*time.Millisecond, time.Second
	return sc
}
