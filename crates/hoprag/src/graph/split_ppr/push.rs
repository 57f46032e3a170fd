//! Forward push (Andersen, Chung & Lang 2006) on `S` from the entity seeds, with the
//! walk's steps by source node and the push states kept between queries.

use crate::graph::ppr::PprGraph;

/// The push starts at this threshold on `residual / degree`, relative to the seeds' mass,
/// and divides it by [`PUSH_STEP`] until the ranking is proven. A push's work grows as its
/// threshold shrinks, and the last round overshoots the threshold the proof needed by up
/// to the step: on the 2wiki graph (51 questions) a step of 3 took a median of 18,000
/// edge steps a query against 32,000 at 8 (mean 58,000 against 109,000), for 4.8 rounds
/// instead of 3.3 (each round's bounds and proof cost about 0.07 ms); 2 took 20,000 in
/// 6.6 rounds, 4 took 24,000 in 4.
pub(super) const PUSH_START: f64 = 1e-4;
pub(super) const PUSH_STEP: f64 = 3.0;
pub(super) const PUSH_FLOOR: f64 = 1e-14;

/// `P(u → v)` for every edge, grouped by `u`, as the full walk stores them (f32): the
/// walk's rows list each node's incoming steps, lane-interleaved for the multi-column
/// pass, while a push from `u` reads `u`'s outgoing steps, contiguous here.
pub(super) struct Steps {
    /// Node `u`'s steps are `edges[offsets[u]..offsets[u + 1]]`.
    pub(super) offsets: Vec<usize>,
    pub(super) edges: Vec<(u32, f32)>,
    /// Push states of every node, kept between queries (one per query running at once):
    /// making one anew, with each node's degree, cost 0.2 ms a query on the 2wiki graph,
    /// while a query touches a few thousand of its 53,000 nodes, and resets only those.
    pub(super) states: std::sync::Mutex<Vec<Vec<Node>>>,
    pub(super) degrees: Vec<f64>,
}

impl Steps {
    pub(super) fn new(graph: &PprGraph) -> Steps {
        let n = graph.nodes();
        let mut count = vec![0usize; n + 1];
        for v in 0..n {
            for (u, p) in graph.row(v) {
                if p > 0.0 {
                    count[u as usize + 1] += 1;
                }
            }
        }
        for u in 0..n {
            count[u + 1] += count[u];
        }
        let offsets = count.clone();
        let mut edges = vec![(0u32, 0f32); offsets[n]];
        for v in 0..n {
            // Row v lists p = P(u → v) for each neighbour u.
            for (u, p) in graph.row(v) {
                if p > 0.0 {
                    let slot = &mut count[u as usize];
                    edges[*slot] = (v as u32, p);
                    *slot += 1;
                }
            }
        }
        let degrees = (0..n).map(|u| graph.degree(u)).collect();
        Steps { offsets, edges, states: Default::default(), degrees }
    }

    pub(super) fn from(&self, u: usize) -> &[(u32, f32)] {
        &self.edges[self.offsets[u]..self.offsets[u + 1]]
    }

    /// A push state with nothing pushed.
    pub(super) fn take_state(&self) -> Vec<Node> {
        let kept = self.states.lock().unwrap_or_else(|e| e.into_inner()).pop();
        kept.unwrap_or_else(|| self.degrees.iter().map(|&degree| Node { degree, ..Node::default() }).collect())
    }

    /// Takes back a state whose `touched` nodes are the only ones pushed to.
    pub(super) fn give_back(&self, mut nodes: Vec<Node>, touched: &[u32]) {
        for &u in touched {
            let node = &mut nodes[u as usize];
            *node = Node { degree: node.degree, ..Node::default() };
        }
        self.states.lock().unwrap_or_else(|e| e.into_inner()).push(nodes);
    }
}

/// How far from its score a node's estimate may be once the push has left every
/// residual at most `eps · degree` in magnitude with `residual` in all (absolute values;
/// undirected graph): the mass still to reach it. Below it where every residual is
/// positive (the seeds'); either side where some are negative (a deferred walk's
/// residuals, [`super::repair`]).
pub(super) fn push_bound(residual: f64, eps: f64, degree: f64) -> f64 {
    residual.min(eps * degree)
}

/// One node's state in the push; what a step to the node reads and writes, together.
#[derive(Clone, Copy, Default)]
pub(super) struct Node {
    pub(super) estimate: f64,
    pub(super) residual: f64,
    pub(super) degree: f64,
    pub(super) queued: bool,
}

/// Forward push on `S`: `estimate + S(residual)` stays equal to `S(seeds)`.
pub(super) struct Push<'a> {
    pub(super) steps: &'a Steps,
    pub(super) damping: f64,
    pub(super) nodes: Vec<Node>,
    /// Nodes whose residual was ever set, once each (a node with no estimate and no
    /// residual, not queued, has never been), so that their residuals sum to the mass
    /// left unpushed, not more.
    pub(super) touched: Vec<u32>,
    pub(super) queue: std::collections::VecDeque<u32>,
    pub(super) pushes: usize,
    /// Steps taken.
    pub(super) work: usize,
}

impl Drop for Push<'_> {
    fn drop(&mut self) {
        self.steps.give_back(std::mem::take(&mut self.nodes), &self.touched);
    }
}

impl<'a> Push<'a> {
    pub(super) fn new(steps: &'a Steps, damping: f64) -> Self {
        let nodes = steps.take_state();
        Push { steps, damping, nodes, touched: Vec::new(), queue: Default::default(), pushes: 0, work: 0 }
    }

    pub(super) fn seed(&mut self, u: usize, mass: f64) {
        self.add(u as u32, mass);
    }

    /// Adds residual mass to node `u`, listing it the first time; the node, for the
    /// caller to queue.
    #[inline]
    pub(super) fn add(&mut self, u: u32, mass: f64) -> &mut Node {
        if !self.reached(u as usize) {
            self.touched.push(u);
        }
        let node = &mut self.nodes[u as usize];
        node.residual += mass;
        node
    }

    /// Pushes until every residual is at most `eps · degree` in magnitude (zero on
    /// dangling nodes), or until `limit` steps in all have been taken: whether it got
    /// there.
    pub(super) fn run(&mut self, eps: f64, limit: usize) -> bool {
        let above = |n: &Node| n.residual != 0.0 && n.residual.abs() > eps * n.degree;
        for &u in &self.touched {
            let node = &mut self.nodes[u as usize];
            if !node.queued && above(node) {
                node.queued = true;
                self.queue.push_back(u);
            }
        }
        let d = self.damping;
        while let Some(&u) = self.queue.front() {
            if self.work >= limit {
                return false;
            }
            self.queue.pop_front();
            let node = &mut self.nodes[u as usize];
            node.queued = false;
            let r = std::mem::take(&mut node.residual);
            node.estimate += (1.0 - d) * r;
            self.pushes += 1;
            // A dangling node has no steps: S loses what reaches it.
            let steps: &'a Steps = self.steps;
            let steps = steps.from(u as usize);
            self.work += steps.len();
            // The states this push reaches, and the next push's steps, are asked for
            // before they are read: a query's first touch of a node looks like a miss to
            // memory (the fact scan just before reads more than the cache keeps), and the
            // loop below, one node at a time, would wait for each. On 2wiki (51 questions
            // × 5, p50 of two runs each, in turn) the later rounds' pushes took 0.70 /
            // 0.73 ms without, 0.57 / 0.58 with; the first round 0.08 / 0.10 against
            // 0.06 / 0.06.
            steps.iter().filter_map(|&(v, _)| self.nodes.get(v as usize)).for_each(crate::simd::prefetch);
            if let Some(next) = self.queue.front().and_then(|&u| self.steps.from(u as usize).first()) {
                crate::simd::prefetch(next);
            }
            for &(v, p) in steps {
                let node = self.add(v, d * r * p as f64);
                if !node.queued && above(node) {
                    node.queued = true;
                    self.queue.push_back(v);
                }
            }
        }
        true
    }

    /// The `eps` whose bounds hold after a run to `eps` that stopped at its limit: a node
    /// over `eps · degree` is queued, so the largest residual per degree in the queue (a
    /// dangling node's bound is the whole residual).
    pub(super) fn stopped_at(&self, eps: f64) -> f64 {
        let ratio = |u: &u32| {
            let node = &self.nodes[*u as usize];
            if node.degree > 0.0 {
                node.residual.abs() / node.degree
            } else {
                f64::INFINITY
            }
        };
        self.queue.iter().map(ratio).fold(eps, f64::max)
    }

    /// Node `u`'s estimate with the next step's share of the residuals on it and its
    /// neighbours, `(1 − d)·(r_u + d·Σ_i P(i → u)·r_i)`: still a lower bound on its score.
    pub(super) fn ahead(&self, graph: &PprGraph, u: usize) -> f64 {
        let d = self.damping;
        let arriving: f64 = graph.row(u).map(|(i, p)| p as f64 * self.nodes[i as usize].residual).sum();
        let node = &self.nodes[u];
        node.estimate + (1.0 - d) * (node.residual + d * arriving)
    }

    /// Whether the push has ever set node `u`'s residual.
    pub(super) fn reached(&self, u: usize) -> bool {
        let node = &self.nodes[u];
        node.residual != 0.0 || node.estimate != 0.0 || node.queued
    }

    /// The residual mass left, in absolute values.
    pub(super) fn residual(&self) -> f64 {
        self.touched.iter().map(|&u| self.nodes[u as usize].residual.abs()).sum()
    }

    /// The lowest estimate of a passage node (at `first..`) the push reached, if below
    /// 0: with negative residuals pushed, how far under 0 a reached passage's estimate
    /// may be, which a bound that takes every estimate as 0 must allow for.
    pub(super) fn lowest_passage_estimate(&self, first: usize) -> f64 {
        let low = self.touched.iter().filter(|&&u| u as usize >= first).map(|&u| self.nodes[u as usize].estimate);
        low.fold(0.0, f64::min)
    }
}
