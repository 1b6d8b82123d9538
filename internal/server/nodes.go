package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// Cluster is how this node works with the others sharing its database.
type Cluster struct {
	// Advertise is the URL the other nodes send this node's sandboxes'
	// requests to (CORDON_ADVERTISE when unset). Without it, or without a
	// secret, a request for this node's sandbox sent to another node is
	// answered 421 with this node's name.
	Advertise string `yaml:"advertise"`
	// SecretFile holds the secret the nodes sign the requests they
	// forward with, at least 32 bytes (CORDON_CLUSTER_SECRET holds the
	// secret itself when unset); a relative path is the configuration
	// file's.
	SecretFile string `yaml:"secret_file"`
	// Heartbeat is how often a node says it is alive (default 2s);
	// NodeTimeout how long a node may be silent before another declares
	// it dead and its sandboxes lost (default 15s, at least 3 beats).
	Heartbeat   string `yaml:"heartbeat"`
	NodeTimeout string `yaml:"node_timeout"`

	beat, timeout time.Duration
	secret        []byte
}

// Defaults of the cluster section.
const (
	DefaultHeartbeat   = 2 * time.Second
	DefaultNodeTimeout = 15 * time.Second
	// minSecret is the shortest cluster secret taken, in bytes.
	minSecret = 32
)

// endedNodeLost is why the sandboxes of a node declared dead ended.
const endedNodeLost = "node_lost"

// checkCluster reads the cluster section (the secret file among it).
func (c *Config) checkCluster(at func(p, field, msg string) error) error {
	cl := &c.Cluster
	var err error
	if cl.beat, err = duration(cl.Heartbeat, DefaultHeartbeat); err != nil {
		return at("$.cluster.heartbeat", "cluster.heartbeat", err.Error())
	}
	if cl.timeout, err = duration(cl.NodeTimeout, DefaultNodeTimeout); err != nil {
		return at("$.cluster.node_timeout", "cluster.node_timeout", err.Error())
	}
	if cl.timeout < 3*cl.beat {
		return at("$.cluster.node_timeout", "cluster.node_timeout", fmt.Sprintf("want at least 3 heartbeats (%s), so that a late beat is not a death", 3*cl.beat))
	}
	if cl.Advertise != "" {
		if err := checkAdvertise(cl.Advertise); err != nil {
			return at("$.cluster.advertise", "cluster.advertise", err.Error())
		}
	}
	if cl.SecretFile != "" {
		p := c.ClusterSecretFile()
		data, err := hostfile.ReadFile(p, 4096)
		if err != nil {
			return at("$.cluster.secret_file", "cluster.secret_file", err.Error())
		}
		if cl.secret = []byte(strings.TrimSpace(string(data))); len(cl.secret) < minSecret {
			return at("$.cluster.secret_file", "cluster.secret_file", fmt.Sprintf("%s holds %d bytes; want a secret of at least %d (openssl rand -hex 32)", p, len(cl.secret), minSecret))
		}
	}
	return nil
}

// checkAdvertise checks a node's advertised URL: http or https, a host,
// nothing else.
func checkAdvertise(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("want the node's URL as http://HOST:PORT or https://HOST:PORT, found %q", s)
	}
	return nil
}

// ClusterSecretFile is the file the cluster's secret is read from, as an
// absolute path ("" when the configuration names none).
func (c *Config) ClusterSecretFile() string {
	p := c.Cluster.SecretFile
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// FromEnv completes the configuration from the environment where the file
// leaves it to the place a node runs (a pod's name, its address, its
// secrets): CORDON_DATABASE is the database, CORDON_NODE names the node,
// CORDON_ADVERTISE is its URL for the others, CORDON_CLUSTER_SECRET the
// secret they share. The file's values win. Without either, the node is
// named after its host.
func (c *Config) FromEnv(getenv func(string) string) error {
	if c.Database == "" {
		c.Database = getenv("CORDON_DATABASE")
	}
	if c.Node == "" {
		c.Node = getenv("CORDON_NODE")
	}
	if c.Node == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return errors.New("the node has no name: set node in the configuration or CORDON_NODE")
		}
		c.Node = host
	}
	if !validNode(c.Node) {
		return fmt.Errorf("node %q: a node's name is 1 to 253 letters, digits, '.', '_', '-', ':' and '/'", c.Node)
	}
	cl := &c.Cluster
	if cl.Advertise == "" {
		if cl.Advertise = getenv("CORDON_ADVERTISE"); cl.Advertise != "" {
			if err := checkAdvertise(cl.Advertise); err != nil {
				return fmt.Errorf("CORDON_ADVERTISE: %w", err)
			}
		}
	}
	if cl.secret == nil {
		if s := strings.TrimSpace(getenv("CORDON_CLUSTER_SECRET")); s != "" {
			if len(s) < minSecret {
				return fmt.Errorf("CORDON_CLUSTER_SECRET holds %d bytes; want at least %d", len(s), minSecret)
			}
			cl.secret = []byte(s)
		}
	}
	if cl.Advertise != "" && cl.secret == nil {
		return errors.New("cluster.advertise needs the cluster's secret (cluster.secret_file or CORDON_CLUSTER_SECRET): the nodes sign the requests they forward with it")
	}
	return nil
}

// validNode reports whether s can name a node.
func validNode(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-:/", c)) {
			return false
		}
	}
	return true
}

// register enters this node in the database's registry, before the
// server does anything in its name: a live node of the same name is
// refused (its sandboxes would be taken for this one's leftovers).
func (s *Server) register() error {
	b := make([]byte, 8)
	rand.Read(b)
	inc := hex.EncodeToString(b)
	s.incarnation.Store(&inc)
	// A node beats every beat: one of this name silent for 3 beats is
	// gone (this node's last run, killed), and this run takes the name
	// over; one that beats meanwhile is alive, and this run is refused.
	gone := 3 * s.beat()
	deadline := time.Now().Add(gone + 2*s.beat())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.opts.DB.Register(ctx, statedb.Node{Name: s.opts.Node, Incarnation: inc, Advertise: s.advertise(), Load: s.load()}, gone)
		cancel()
		switch {
		case errors.Is(err, statedb.ErrNodeInUse) && time.Now().Before(deadline):
			time.Sleep(s.beat())
			continue
		case err != nil:
			return fmt.Errorf("node %s: %w", s.opts.Node, err)
		}
		now := time.Now().UnixNano()
		s.beatingSince.Store(now)
		s.lastBeat.Store(now)
		return nil
	}
}

// inc is this run's incarnation in the registry (register sets it).
func (s *Server) inc() string {
	if p := s.incarnation.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *Server) advertise() string {
	if s.opts.Config.Cluster.secret == nil {
		return "" // no forwarding without a secret
	}
	return strings.TrimSuffix(s.opts.Config.Cluster.Advertise, "/")
}

// Times returns the heartbeat's interval and the node timeout.
func (c *Cluster) Times() (beat, timeout time.Duration) {
	return orDefault(c.beat, DefaultHeartbeat), orDefault(c.timeout, DefaultNodeTimeout)
}

func (s *Server) beat() time.Duration { return orDefault(s.opts.Config.Cluster.beat, DefaultHeartbeat) }

func (s *Server) timeout() time.Duration {
	return orDefault(s.opts.Config.Cluster.timeout, DefaultNodeTimeout)
}

// orDefault is d, or def when d is not set.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// load is this node's live sandboxes and bound per agent.
func (s *Server) load() statedb.Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := statedb.Load{Agents: map[string]statedb.AgentLoad{}}
	for name, a := range s.opts.Config.Agents {
		l.Agents[name] = statedb.AgentLoad{Live: s.claiming[name], Max: a.MaxSandboxes}
	}
	for _, e := range s.entries {
		if e.state() == "" {
			al := l.Agents[e.agent.Name]
			al.Live++
			l.Agents[e.agent.Name] = al
		}
	}
	return l
}

// heartbeats says every beat that this node is alive, learns whether it
// was asked to drain, and declares dead the nodes silent for longer than
// node_timeout. A node that finds itself declared dead (cut off from the
// database while the others were not) ends its sandboxes, which the
// others report lost, and registers again.
func (s *Server) heartbeats() {
	defer close(s.beatsDone)
	s.repeat(s.stopBeats, s.beat(), func() error {
		if err := s.heartbeat(); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		return nil
	}, "(tried again every "+s.beat().String()+")", "heartbeat: the database answers again")
}

// stopping says whether Close has begun.
func (s *Server) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// heartbeat is one round of heartbeats. While the server stops, it only
// beats.
func (s *Server) heartbeat() error {
	// A loaded database may take longer than a beat: a beat waits for
	// it up to half the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout()/2)
	defer cancel()
	state, err := s.opts.DB.Heartbeat(ctx, s.opts.Node, s.inc(), s.load())
	switch {
	case errors.Is(err, statedb.ErrFenced) && s.stopping():
		return err // its sandboxes are being ended
	case errors.Is(err, statedb.ErrFenced):
		s.logf("node %s was declared dead by another node: its sandboxes are ended (%s); registering again", s.opts.Node, endedNodeLost)
		s.endAll(endedNodeLost)
		if err := s.register(); err != nil {
			if errors.Is(err, statedb.ErrNodeInUse) {
				// Another run of this name took it over (this one
				// looked gone for three beats): this one stops, as on
				// SIGTERM, rather than serve under a name that is not
				// its own.
				s.logf("another run of node %s has taken its name over: this one stops", s.opts.Node)
				s.askDrain()
			}
			return err
		}
	case err != nil:
		// The database may be down for every node (a failover): this
		// node's sandboxes go on. If the others could beat meanwhile and
		// declared this one dead, the next heartbeat finds it fenced.
		s.beatingSince.Store(0)
		return err
	default:
		// A beat that comes more than half node_timeout (and two beats)
		// after the last is a miss too: this node did not run meanwhile
		// (a pause of the process or of its host), or the database
		// answered slowly, and held the other nodes' beats up as well.
		// Until it has beaten on time for node_timeout again, its view
		// of who is silent is not its own to act on.
		now := time.Now().UnixNano()
		late := max(s.timeout()/2, 2*s.beat())
		if last := s.lastBeat.Swap(now); last != 0 && time.Duration(now-last) > late {
			if !s.lateSaid {
				s.logf("this node's heartbeat came %s after the last (more than %s): it declares no node dead until it has beaten on time for node_timeout (%s)", time.Duration(now-last).Round(time.Millisecond), late, s.timeout())
				s.lateSaid = true
			}
			s.beatingSince.Store(now)
		} else {
			s.lateSaid = false
			s.beatingSince.CompareAndSwap(0, now)
		}
		if state == statedb.NodeDraining && !s.stopping() && s.askDrain() {
			s.logf("asked to drain (cordon serve --drain)")
		}
	}
	if s.stopping() {
		return nil
	}
	return s.sweepDead(ctx)
}

// askDrain has the caller stop the server as on SIGTERM (OnDrain); it
// reports false when that was asked already.
func (s *Server) askDrain() bool {
	if !s.drainAsked.CompareAndSwap(false, true) {
		return false
	}
	if s.opts.OnDrain != nil {
		go s.opts.OnDrain()
	}
	return true
}

// endAll ends every claimed sandbox of this node for why, and returns how
// many it ended.
func (s *Server) endAll(why string) int {
	s.mu.Lock()
	var live []*entry
	for _, e := range s.entries {
		if e.state() == "" {
			live = append(live, e)
		}
	}
	s.mu.Unlock()
	for _, e := range live {
		s.end(e, why)
	}
	return len(live)
}

// sweepDead declares dead the nodes silent past node_timeout; for each
// one this node was first to declare, their sandboxes are recorded as
// ended (node_lost), in this node's audit log and in the sessions, apart
// from the heartbeats, which go on meanwhile (however many sandboxes the
// dead node held, this node is not silent for them).
func (s *Server) sweepDead(ctx context.Context) error {
	// Only a node that has itself beaten for node_timeout without a miss
	// may find another silent: after an outage of the database, every
	// node looks silent to the first one back.
	if since := s.beatingSince.Load(); since == 0 || time.Since(time.Unix(0, since)) < s.timeout() {
		return nil
	}
	nodes, err := s.opts.DB.BeatNodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Name != s.opts.Node && n.State == statedb.NodeDead && n.Age > 3*s.timeout() {
			// Declared dead long ago and its sandboxes still not
			// ended: the node that declared it stopped first.
			s.startEndingLost(n)
			continue
		}
		if n.Name == s.opts.Node || (n.State != statedb.NodeAlive && n.State != statedb.NodeDraining) || n.Age <= s.timeout() {
			continue
		}
		won, err := s.opts.DB.DeclareDead(ctx, n.Name, n.Incarnation, s.timeout())
		if err != nil {
			return err
		}
		if !won {
			continue
		}
		s.logf("node %s was silent for %s (node_timeout %s): declared dead", n.Name, n.Age.Round(time.Millisecond), s.timeout())
		s.metrics.add(1, "cordon_nodes_declared_dead_total", "node", n.Name)
		if !s.startEndingLost(n) {
			// Stopping, this node ends them before it leaves.
			return s.endLost(&lostNode{Node: n})
		}
	}
	return nil
}

// startEndingLost starts ending the sandboxes of a dead node, unless this
// node is at it already; false when the server is stopping.
func (s *Server) startEndingLost(n statedb.Node) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	key := n.Name + "\x00" + n.Incarnation
	if s.endingNodes[key] {
		return true
	}
	if s.endingNodes == nil {
		s.endingNodes = map[string]bool{}
	}
	s.endingNodes[key] = true
	s.wg.Add(1) // before Close waits
	go func() {
		s.endingLost(n)
		s.mu.Lock()
		delete(s.endingNodes, key)
		s.mu.Unlock()
	}()
	return true
}

// endingLost ends the sandboxes of a dead node, trying again every beat
// until it has, or the server stops.
func (s *Server) endingLost(n statedb.Node) {
	defer s.wg.Done()
	l := &lostNode{Node: n}
	for logged := false; ; {
		err := s.endLost(l)
		if err == nil {
			return
		}
		if !logged {
			s.logf("ending the sandboxes of node %s: %v (tried again every %v)", n.Name, err, s.beat())
			logged = true
		}
		select {
		case <-s.stop:
			return
		case <-time.After(s.beat()):
		}
	}
}

// lostNode is a run of a node declared dead, whose sandboxes are being
// ended.
type lostNode struct {
	statedb.Node
	// recorded are the sandboxes whose end the audit log has.
	recorded map[string]bool
}

// endLost records the sandboxes of a dead node as ended (node_lost): in
// this node's audit log first, then in the sessions every node reads, with
// the idempotency keys it left running (their outcome unknown). A next
// run of the node that took its name over meanwhile ends them itself
// (recoverAtStart): its own are not touched.
func (s *Server) endLost(l *lostNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := s.opts.DB.NodeByName(ctx, l.Name); err != nil {
		return err
	} else if n.Incarnation != l.Incarnation || n.State != statedb.NodeDead {
		s.logf("node %s started again before its sandboxes were ended: it ends them itself", l.Name)
		return nil
	}
	sessions, err := s.opts.DB.NodeSessions(ctx, l.Name)
	if err != nil {
		return err
	}
	lost := unended(sessions)
	if l.recorded == nil {
		l.recorded = map[string]bool{}
		ids := make([]string, len(lost))
		for i, sb := range lost {
			ids[i] = sb.ID
		}
		s.event(audit.Event{Kind: audit.Decision, Type: "node_lost", Data: map[string]any{"node": l.Name, "silent_ms": l.Age.Milliseconds(), "sandboxes": ids}})
	}
	for _, sb := range lost {
		if !l.recorded[sb.ID] {
			s.event(audit.Event{Sandbox: sb.ID, Agent: sb.Agent, Kind: audit.Decision, Type: "end",
				Data: map[string]any{"reason": endedNodeLost, "node": l.Name, "declared_by": s.opts.Node}})
		}
	}
	if err := s.auditWritten(s.opts.Audit.Flush()); err != nil {
		return fmt.Errorf("recording the lost sandboxes: %w", err)
	}
	infos := make(map[string]any, len(lost))
	for _, sb := range lost {
		l.recorded[sb.ID] = true
		sb.Node, sb.State, sb.Ended, sb.Running = l.Name, "ended", endedNodeLost, 0
		infos[sb.ID] = sb
	}
	done, err := s.opts.DB.EndLost(ctx, l.Name, l.Incarnation, infos)
	if err != nil {
		return err
	}
	if !done {
		s.logf("node %s started again before its sandboxes were ended: it ends them itself", l.Name)
		return nil
	}
	for _, sb := range lost {
		s.metrics.ended(sb.Agent, endedNodeLost)
	}
	return nil
}

// deregister marks this node stopped in the registry (Close).
func (s *Server) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, from := range []string{statedb.NodeAlive, statedb.NodeDraining} {
		if ok, err := s.opts.DB.SetNodeState(ctx, s.opts.Node, s.inc(), from, statedb.NodeLeft); ok || err != nil {
			return
		}
	}
}
