//! Analysis of a dependency-DAG schedule (paper 004's form): per-stage link loads, the
//! bottleneck bound and what the tasks deliver.
//!
//! A DAG has no phases, so it is cut into **stages**: a task with no predecessor is in stage
//! 0; otherwise it is one stage after its latest predecessor it waits for completely, and in
//! the same stage as a predecessor it relays (cut-through forwarding overlaps the two
//! transfers, so their links are busy at the same time). Every task of a stage can be in
//! flight at once, so the stages are counted exactly like the phases of a phased schedule —
//! by [`analyze_with`](super::analyze_with), which gives per-stage flows, maximum load,
//! contended channels and lock-step fluid time. Stage times summed are what the DAG takes if
//! its stages run back to back; the [bottleneck bound](super::bound) is what no order can beat.
//!
//! **Completeness** is what the tasks' data add up to ([`blocks::derive_dag`]): one block per
//! ordered pair of ranks (an all-to-all) or one per rank to a root (a gather), all of one size.
//!
//! ```
//! use netweave_core::analysis::dag::analyze_dag;
//! use netweave_core::analysis::AnalysisOptions;
//! use netweave_core::traffic::{dag::{Dependency, TaskGraph}, Message};
//! use netweave_core::{routing::shortest_path, topology::grid::mesh};
//! let topo = mesh(&[3], 1).unwrap();
//! let routes = shortest_path(&topo).unwrap();
//! let mut g = TaskGraph::new("gather", 3);
//! g.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[]).unwrap();
//! let a = g.add_task(Message { src: 2, dst: 1, bytes: 8 }, &[]).unwrap();
//! g.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[(a, Dependency::Relay)]).unwrap();
//! let r = analyze_dag(&topo, &routes, &g, &AnalysisOptions::default()).unwrap();
//! assert_eq!((r.stages, r.collective.as_deref(), r.complete), (1, Some("gather(root=0)"), true));
//! assert_eq!(r.loads.phases[0].max_load, 2); // the first task and the relay share the link 1→0
//! ```

use serde::Serialize;

use super::bound::{dag_bound, BottleneckBound};
use super::{analyze_with, AnalysisOptions, LoadReport};
use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::dag::{Dependency, TaskGraph};
use crate::traffic::{blocks, Collective, Message, Schedule};

/// Result of [`analyze_dag`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DagReport {
    /// Number of stages (see the module docs).
    pub stages: usize,
    pub tasks: usize,
    pub dependencies: usize,
    /// Tasks that forward a predecessor's data (cut-through relays).
    pub relays: usize,
    /// The collective the tasks deliver (`alltoall`, `gather(root=R)`), `None` when neither.
    pub collective: Option<String>,
    /// The tasks deliver a whole all-to-all or gather, with one block size.
    pub complete: bool,
    /// Why not, when not complete.
    pub problem: Option<String>,
    /// Bytes of each block when complete.
    pub block_bytes: Option<u64>,
    /// The stages counted as phases: `loads.phases[s]` is stage `s`; `loads.fluid_time_s` the
    /// stages run back to back. Its completeness fields are the DAG's (above).
    pub loads: LoadReport,
    /// The bottleneck bound of all tasks.
    pub bound: BottleneckBound,
}

/// Stage of every task: after its latest completely-awaited predecessor, with what it relays.
pub fn stages(g: &TaskGraph) -> Vec<u32> {
    let mut stage = vec![0u32; g.num_tasks()];
    for t in 0..g.num_tasks() {
        // Predecessors have smaller ids (a graph is built in dependency order): one pass.
        stage[t] = g
            .predecessors(t as u32)
            .iter()
            .map(|&(p, kind)| stage[p as usize] + u32::from(kind == Dependency::Complete))
            .max()
            .unwrap_or(0);
    }
    stage
}

/// Per-stage loads, bound and completeness of `g` routed by `routes` on `topo`.
pub fn analyze_dag(
    topo: &Topology,
    routes: &RoutingTable,
    g: &TaskGraph,
    options: &AnalysisOptions,
) -> Result<DagReport> {
    routes.check_fits(topo)?;
    g.check_fits(topo)?;
    let stage = stages(g);
    let num_stages = stage.iter().max().map_or(0, |&s| s as usize + 1);
    let mut phases: Vec<Vec<Message>> = vec![Vec::new(); num_stages];
    for (t, &s) in stage.iter().enumerate() {
        phases[s as usize].push(g.task(t as u32));
    }
    let as_phases = Schedule::from_phases(g.name(), g.num_ranks(), phases)?.with_placement(g.placement().to_vec())?;
    let mut loads = analyze_with(topo, routes, &as_phases, options)?;
    let relays = (0..g.num_tasks() as u32)
        .filter(|&t| g.predecessors(t).iter().any(|&(_, kind)| kind == Dependency::Relay))
        .count();
    let derived = blocks::derive_dag(g);
    let (collective, complete, problem, block_bytes) = match &derived {
        _ if g.num_tasks() == 0 => (None, false, Some("the DAG has no tasks".to_string()), None),
        Some(b) => (Some(collective_name(b.collective)), true, None, Some(b.block_bytes)),
        None => (
            None,
            false,
            Some(format!(
                "the tasks' data do not add up to an all-to-all or a gather over {} ranks with one block size",
                g.num_ranks()
            )),
            None,
        ),
    };
    // The phased view claims nothing; the DAG's own verdict replaces its vacuous one.
    loads.complete = complete;
    loads.problem = problem.clone();
    Ok(DagReport {
        stages: num_stages,
        tasks: g.num_tasks(),
        dependencies: g.num_dependencies(),
        relays,
        collective,
        complete,
        problem,
        block_bytes,
        loads,
        bound: dag_bound(topo, routes, g)?,
    })
}

fn collective_name(c: Collective) -> String {
    match c {
        Collective::Gather { root } => format!("gather(root={root})"),
        other => other.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::routing::shortest_path;
    use crate::topology::grid::{mesh, torus};
    use crate::traffic::alltoall;

    #[test]
    fn a_phased_schedule_as_a_dag_has_its_phases_as_stages() {
        // from_schedule makes each phase wait for the one before: the stages are the phases,
        // so every per-stage figure is the phase's.
        let topo = torus(&[4, 4], 1).unwrap();
        let routes = shortest_path(&topo).unwrap();
        let s = alltoall::shift(16, 1 << 16).unwrap();
        let g = TaskGraph::from_schedule(&s).unwrap();
        let dag = analyze_dag(&topo, &routes, &g, &AnalysisOptions::default()).unwrap();
        let phased = analyze(&topo, &routes, &s).unwrap();
        assert_eq!(dag.stages, s.num_phases());
        assert_eq!(
            dag.loads.phases.iter().map(|p| p.max_load).collect::<Vec<_>>(),
            phased.phases.iter().map(|p| p.max_load).collect::<Vec<_>>()
        );
        assert_eq!(dag.loads.fluid_time_s, phased.fluid_time_s);
        assert_eq!((dag.collective.as_deref(), dag.complete, dag.block_bytes), (Some("alltoall"), true, Some(1 << 16)));
        assert!(dag.bound.seconds > 0.0 && dag.bound.seconds <= dag.loads.fluid_time_host_links_s * (1.0 + 1e-12));
    }

    #[test]
    fn an_incomplete_or_empty_dag_says_so() {
        let topo = mesh(&[4], 1).unwrap();
        let routes = shortest_path(&topo).unwrap();
        let mut g = TaskGraph::new("partial", 4);
        let a = g.add_task(Message { src: 0, dst: 1, bytes: 8 }, &[]).unwrap();
        g.add_task(Message { src: 1, dst: 2, bytes: 8 }, &[(a, Dependency::Complete)]).unwrap();
        let r = analyze_dag(&topo, &routes, &g, &AnalysisOptions::default()).unwrap();
        assert_eq!(r.stages, 2);
        assert!(!r.complete && !r.loads.complete);
        assert!(r.problem.unwrap().contains("do not add up"));
        let empty = analyze_dag(&topo, &routes, &TaskGraph::new("empty", 4), &AnalysisOptions::default()).unwrap();
        assert_eq!((empty.stages, empty.complete, empty.problem.as_deref()), (0, false, Some("the DAG has no tasks")));
    }

    #[test]
    fn a_relay_shares_its_stage_and_a_completed_wait_does_not() {
        let mut g = TaskGraph::new("chain", 4);
        let a = g.add_task(Message { src: 0, dst: 1, bytes: 8 }, &[]).unwrap();
        let b = g.add_task(Message { src: 1, dst: 2, bytes: 8 }, &[(a, Dependency::Relay)]).unwrap();
        g.add_task(Message { src: 2, dst: 3, bytes: 8 }, &[(b, Dependency::Complete), (a, Dependency::Complete)])
            .unwrap();
        assert_eq!(stages(&g), vec![0, 0, 1]);
    }
}
