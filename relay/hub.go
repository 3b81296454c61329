package relay

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"modelrelay/protocol"
	"modelrelay/relay/keys"
	"modelrelay/relay/wsconn"
)

const (
	maxWorkerNameRunes = 128
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// Workers are daemons, not browsers: the Origin header means nothing here.
	CheckOrigin: func(*http.Request) bool { return true },
}

// ServeWorkerConnect is GET /v1/worker/connect: a relay worker joins its provider's pool.
func (s *Server) ServeWorkerConnect(w http.ResponseWriter, r *http.Request) {
	provider := r.URL.Query().Get("provider")
	if provider == "" {
		provider = "local"
	}
	peer := peerIP(r, s.opts.TrustedProxies)
	// Checked before the upgrade, so a throttled guess waits without WebSocket buffers; a
	// failed one still completes the upgrade and then closes 1008, as the protocol says.
	reason := s.authenticate(r, provider, peer)
	hijacked := &wsconn.Hijacker{ResponseWriter: w}
	conn, err := upgrader.Upgrade(hijacked, r, nil)
	if err != nil {
		return // the upgrader already answered with an HTTP error
	}
	conn.SetReadLimit(s.opts.MaxFrameBytes)
	if reason != "" {
		s.log.Warn("worker rejected", "peer", peer, "provider", provider, "reason", reason)
		closeNow(conn, websocket.ClosePolicyViolation, reason)
		return
	}
	var reader wsconn.Reader
	reg, err := readRegister(conn, &reader, s.timings.RegisterTimeout)
	if err == nil && reg.ProtocolVersion == nil && s.opts.RequireProtocolVersion {
		err = fmt.Errorf("protocol_version is required")
	}
	if err == nil && reg.ProtocolVersion != nil && *reg.ProtocolVersion != protocol.Version {
		err = fmt.Errorf("unsupported protocol_version %q", truncateRunes(*reg.ProtocolVersion, 64))
	}
	if err != nil {
		s.log.Warn("worker registration failed", "peer", peer, "err", err)
		closeNow(conn, websocket.CloseProtocolError, reasonProtocolError)
		return
	}
	s.register(conn, hijacked.Conn, &reader, provider, reg)
}

// authenticate returns "" when the worker may join, else the close reason. A correct secret
// is accepted at once whatever else comes from the same address [fix: the Rust relay blocks
// the address, correct secrets included, which locks out honest workers behind a NAT]; the
// answer to a wrong one waits its turn in the guess throttle.
func (s *Server) authenticate(r *http.Request, provider, peer string) string {
	secret := r.Header.Get("x-worker-secret")
	if secret == "" {
		secret = r.URL.Query().Get("worker_secret")
	}
	if secret == "" {
		return reasonAuthFailed // rejected, but a missing secret is no guess: not throttled
	}
	want := s.secretFor(provider)
	if want != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1 {
		return ""
	}
	if s.workerKey(r, provider, secret) {
		return ""
	}
	if !s.WrongCredential(r.Context(), "worker", peer) {
		return reasonRateLimited
	}
	return reasonAuthFailed
}

// workerKey reports whether a worker's secret is a valid client API key, which lets a worker
// join as in the Rust server (there under any provider; here under the relay's own, the one
// pool relay workers serve). A key the store cannot check now is refused like a wrong one:
// the worker retries.
func (s *Server) workerKey(r *http.Request, provider, secret string) bool {
	if provider != s.opts.Provider || !strings.HasPrefix(secret, keys.SecretPrefix) {
		return false
	}
	_, err := s.keys.Check(r.Context(), secret, time.Now())
	if err != nil && !errors.Is(err, keys.ErrInvalid) {
		s.log.Warn("worker key not checked: key store unavailable", "err", err)
	}
	return err == nil
}

func (s *Server) secretFor(provider string) string {
	if provider == s.opts.Provider {
		return s.opts.WorkerSecret
	}
	return ""
}

func readRegister(conn *websocket.Conn, reader *wsconn.Reader, timeout time.Duration) (protocol.Register, error) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	kind, data, err := reader.Read(conn)
	if err != nil {
		return protocol.Register{}, fmt.Errorf("read first frame: %w", err)
	}
	if kind != websocket.TextMessage {
		return protocol.Register{}, fmt.Errorf("first frame is not text")
	}
	msg, err := protocol.DecodeWorkerMessage(data)
	if err != nil {
		return protocol.Register{}, err
	}
	reg, ok := msg.(protocol.Register)
	if !ok {
		return protocol.Register{}, fmt.Errorf("first frame is %s, not register", msg.MessageType())
	}
	return reg, nil
}

// closeNow sends a close frame on a connection that has no session yet and waits briefly for
// the peer's answer, so the close frame is read before the socket goes away.
func closeNow(conn *websocket.Conn, code int, reason string) {
	deadline := time.Now().Add(closeHandshakeTimeout)
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
	conn.SetReadDeadline(deadline)
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			break
		}
	}
	conn.Close()
}

// register turns an authenticated connection into a worker session in its provider's pool;
// batch is the socket under conn, and reader the buffer conn's messages are read into.
func (s *Server) register(conn *websocket.Conn, batch *wsconn.Conn, reader *wsconn.Reader, provider string, reg protocol.Register) {
	name, warnings := sanitizeName(reg.WorkerName)
	models, truncated := sanitizeModels(reg.Models, s.opts.MaxModelsPerWorker)
	if truncated {
		warnings = append(warnings, fmt.Sprintf("model list truncated to %d entries", s.opts.MaxModelsPerWorker))
	}
	if len(models) == 0 {
		warnings = append(warnings, "worker registered without any routable models")
	}
	maxConcurrent := int(reg.MaxConcurrent)
	if maxConcurrent == 0 {
		maxConcurrent = 1
	}
	load := 0
	if reg.CurrentLoad != nil {
		load = int(*reg.CurrentLoad)
	}
	id := "worker-" + strconv.FormatUint(s.workerSeq.Add(1), 10)
	pool := s.relayPool(provider)
	ws := &workerSession{
		srv:     s,
		conn:    conn,
		batch:   batch,
		reader:  reader,
		pool:    pool,
		id:      id,
		name:    name,
		log:     s.log.With("worker_id", id, "worker_name", name, "provider", provider),
		send:    make(chan *[]byte, sendBuffer),
		done:    make(chan struct{}),
		wrote:   make(chan struct{}),
		pending: make(map[string]*pendingReq),
	}
	ws.m = &member{id: id, name: name, kind: kindWorker, seq: s.memberSeq.Add(1), target: ws, speech: newSpeech(nil),
		maxConcurrent: maxConcurrent, reported: load, weight: 1}
	ws.m.setModels(models)

	ack := protocol.RegisterAck{WorkerID: id, Models: models, Warnings: warnings}
	if reg.ProtocolVersion != nil {
		ack.ProtocolVersion = reg.ProtocolVersion
	}
	// The ack is queued before the member joins the pool, so it precedes any request frame,
	// and the writer starts only after the join, so a worker that sends traffic the moment it
	// reads the ack finds itself routable.
	ws.enqueueMessage(ack)
	s.sessions.Store(id, ws)
	s.metrics.workersConnected.Inc()
	if err := pool.add(ws.m); err != nil {
		ws.closeWith(websocket.CloseNormalClosure, reasonServerShutdown)
	}
	go ws.writeLoop()
	if s.draining.Load() {
		ws.drain(s.opts.DrainTimeout, reasonServerShutdown)
	}
	ws.log.Info("worker registered", "models", len(models), "max_concurrent", maxConcurrent)
	ws.readLoop()
}

func sanitizeName(raw string) (string, []string) {
	name := strings.TrimSpace(raw)
	switch {
	case name == "":
		return name, []string{"worker_name was empty after trimming"}
	case utf8.RuneCountInString(name) > maxWorkerNameRunes:
		return truncateRunes(name, maxWorkerNameRunes), []string{"worker_name truncated to 128 characters"}
	}
	return name, nil
}

// sanitizeModels trims names, drops empties and exact duplicates (first seen wins), then caps
// the list.
func sanitizeModels(raw []string, limit int) (models []string, truncated bool) {
	models = protocol.CleanModels(raw)
	if limit > 0 && len(models) > limit {
		return models[:limit], true
	}
	return models, false
}

func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
