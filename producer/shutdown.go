package producer

// shutdown fails everything still held and closes every connection. It
// runs on the sender goroutine when Close stops it.
func (s *sender) shutdown() {
	s.stopping = true
	s.cancel()
	for _, n := range s.nodes {
		if n.conn != nil {
			n.conn.Close()
			n.conn = nil // its failing requests are not a connection loss
			s.cfg.hooks.disconnected(n, ErrClosed)
		}
		if n.draining != nil {
			n.draining.Close()
			n.draining = nil
			s.cfg.hooks.disconnected(n, ErrClosed)
		}
	}
	if s.control != nil {
		s.control.Close()
	}
	// Dial and control goroutines end promptly once s.ctx is cancelled;
	// run their events so any connection they opened is closed.
	s.bg.Wait()
	for _, f := range s.p.takeEvents(nil) {
		f()
	}
	s.settleAll()
	p := s.p
	// Attempts in flight are reported before acc.mu is taken: a hook
	// may call Stats or Produce, which take it (Close deadlocked). No
	// topic is added meanwhile: p.acc.closed is set.
	var inflight []*batch
	p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			for _, ps := range t.parts {
				inflight = append(inflight, ps.inflight...)
			}
		})
	})
	for _, b := range inflight {
		s.cfg.hooks.batchRejected(s, -1, b, ErrClosed, false)
	}
	p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			v.dropWaiting(t, func(*waitingRecord) error {
				return &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1, Err: ErrClosed}
			})
			for _, ps := range t.parts {
				for len(ps.inflight) > 0 {
					s.failBatch(ps.inflight[0], ErrClosed, true)
				}
				for len(ps.retry) > 0 {
					b := ps.retry[0]
					s.failBatch(b, ErrClosed, b.maybeWritten)
				}
				s.takeUnsent(v, ps)
				for len(ps.queue) > 0 {
					s.failBatch(s.popQueue(ps), ErrClosed, false)
				}
			}
		})
		v.forgetActive()
		if s.txn != nil {
			s.txn.shutdown()
		}
	})
}
